// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @matmul_2d
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3x4xf32>)
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[R:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x4xf32>) outs(%[[INIT]] : tensor<2x4xf32>)
// CHECK: return %[[R]]
func.func @matmul_2d(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Batch dimensions broadcast explicitly, collapse into one, and expand back.
// CHECK-DAG: #[[BCAST:.*]] = affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>
// CHECK-LABEL: func.func @matmul_batched
// CHECK-SAME: (%[[A:.*]]: tensor<1x5x2x3xi32>, %[[B:.*]]: tensor<4x1x3x6xi32>)
// CHECK: %[[AB:.*]] = linalg.generic {indexing_maps = [#[[BCAST]], #{{.*}}]{{.*}} ins(%[[A]] : tensor<1x5x2x3xi32>) outs(%{{.*}} : tensor<4x5x2x3xi32>)
// CHECK: %[[AC:.*]] = tensor.collapse_shape %[[AB]] {{\[}}[0, 1], [2], [3]] : tensor<4x5x2x3xi32> into tensor<20x2x3xi32>
// CHECK: %[[BB:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x1x3x6xi32>) outs(%{{.*}} : tensor<4x5x3x6xi32>)
// CHECK: %[[BC:.*]] = tensor.collapse_shape %[[BB]] {{\[}}[0, 1], [2], [3]] : tensor<4x5x3x6xi32> into tensor<20x3x6xi32>
// CHECK: %[[R:.*]] = linalg.batch_matmul ins(%[[AC]], %[[BC]] : tensor<20x2x3xi32>, tensor<20x3x6xi32>) outs(%{{.*}} : tensor<20x2x6xi32>)
// CHECK: tensor.expand_shape %[[R]] {{\[}}[0, 1], [2], [3]] output_shape [4, 5, 2, 6] : tensor<20x2x6xi32> into tensor<4x5x2x6xi32>
func.func @matmul_batched(%a: tensor<1x5x2x3xi32>, %b: tensor<4x1x3x6xi32>) -> tensor<4x5x2x6xi32> {
  %0 = kiln.matmul %a, %b : tensor<1x5x2x3xi32>, tensor<4x1x3x6xi32> -> tensor<4x5x2x6xi32>
  return %0 : tensor<4x5x2x6xi32>
}

// -----

// A batch of rows times a 2-D matrix is one matmul over all the rows (the
// matrix is not copied into every batch); bf16 operands stay bf16 into an
// f32 accumulator (the CPU's bf16 GEMM takes them as they are), and the
// result is rounded to bf16 (with integer ops, see elementwise.mlir).
// CHECK-LABEL: func.func @matmul_bf16
// CHECK-SAME: (%[[A:.*]]: tensor<3x2x4xbf16>, %[[B:.*]]: tensor<4x5xbf16>)
// CHECK-NOT: bf16 to i16
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[A]] {{\[\[}}0, 1], [2]] : tensor<3x2x4xbf16> into tensor<6x4xbf16>
// CHECK-NOT: linalg.generic
// CHECK: %[[R:.*]] = linalg.matmul ins(%[[ROWS]], %[[B]] : tensor<6x4xbf16>, tensor<4x5xbf16>) outs(%{{.*}} : tensor<6x5xf32>)
// CHECK: tensor.expand_shape %[[R]] {{\[\[}}0, 1], [2]] output_shape [3, 2, 5] : tensor<6x5xf32> into tensor<3x2x5xf32>
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
func.func @matmul_bf16(%a: tensor<3x2x4xbf16>, %b: tensor<4x5xbf16>) -> tensor<3x2x5xbf16> {
  %0 = kiln.matmul %a, %b : tensor<3x2x4xbf16>, tensor<4x5xbf16> -> tensor<3x2x5xbf16>
  return %0 : tensor<3x2x5xbf16>
}

// -----

// f16 has no GEMM of its own: its operands are widened to f32 first.
// CHECK-LABEL: func.func @matmul_f16
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<4x5xf32>) outs(%{{.*}} : tensor<2x5xf32>)
func.func @matmul_f16(%a: tensor<2x4xf16>, %b: tensor<4x5xf16>) -> tensor<2x5xf16> {
  %0 = kiln.matmul %a, %b : tensor<2x4xf16>, tensor<4x5xf16> -> tensor<2x5xf16>
  return %0 : tensor<2x5xf16>
}
