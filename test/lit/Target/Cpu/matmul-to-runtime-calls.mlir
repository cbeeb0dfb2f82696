// RUN: kiln-opt %s -kiln-cpu-matmul-to-runtime-calls -split-input-file | FileCheck %s

// f32 matmul and batch_matmul on memrefs: calls of the runtime's GEMM.
// CHECK-LABEL: func.func private @kiln_rt_matmul_f32
// CHECK-LABEL: func.func @matmuls
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @kiln_rt_matmul_f32
// CHECK: call @kiln_rt_matmul_f32
func.func @matmuls(%a: memref<4x8xf32>, %b: memref<8x2xf32>, %c: memref<4x2xf32>,
                   %ba: memref<3x4x8xf32>, %bb: memref<3x8x2xf32>, %bc: memref<3x4x2xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x2xf32>) outs(%c : memref<4x2xf32>)
  linalg.batch_matmul ins(%ba, %bb : memref<3x4x8xf32>, memref<3x8x2xf32>) outs(%bc : memref<3x4x2xf32>)
  return
}

// -----

// f64 and integer matmuls stay linalg (they become loops).
// CHECK-NOT: kiln_rt_matmul_f32
// CHECK-LABEL: func.func @other_types
// CHECK: linalg.matmul {{.*}}f64
// CHECK: linalg.matmul {{.*}}i32
// CHECK-NOT: call
func.func @other_types(%a: memref<4x8xf64>, %b: memref<8x2xf64>, %c: memref<4x2xf64>,
                       %ia: memref<4x8xi32>, %ib: memref<8x2xi32>, %ic: memref<4x2xi32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x2xf64>) outs(%c : memref<4x2xf64>)
  linalg.matmul ins(%ia, %ib : memref<4x8xi32>, memref<8x2xi32>) outs(%ic : memref<4x2xi32>)
  return
}

// -----

// bf16 operands into an f32 C: the runtime's bf16 GEMM; after a zero fill,
// its overwriting form and no fill.
// CHECK-LABEL: func.func private @kiln_rt_matmul_bf16
// CHECK-LABEL: func.func private @kiln_rt_matmul_set_bf16
// CHECK-LABEL: func.func @bf16_matmuls
// CHECK-NOT: linalg.fill
// CHECK: call @kiln_rt_matmul_set_bf16
// CHECK: call @kiln_rt_matmul_bf16
// CHECK-NOT: kiln_rt_matmul_f32
func.func @bf16_matmuls(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %c: memref<4x2xf32>,
                        %ba: memref<3x4x8xbf16>, %bb: memref<3x8x2xbf16>, %bc: memref<3x4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x2xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xf32>)
  linalg.batch_matmul ins(%ba, %bb : memref<3x4x8xbf16>, memref<3x8x2xbf16>) outs(%bc : memref<3x4x2xf32>)
  return
}

// -----

// bf16 into a bf16 C, or one bf16 operand with one f32: no runtime GEMM.
// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: call
// CHECK: linalg.matmul
// CHECK: linalg.matmul
func.func @mixed_types(%a: memref<4x8xbf16>, %b: memref<8x2xbf16>, %c: memref<4x2xbf16>,
                       %f: memref<8x2xf32>, %d: memref<4x2xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x2xbf16>) outs(%c : memref<4x2xbf16>)
  linalg.matmul ins(%a, %f : memref<4x8xbf16>, memref<8x2xf32>) outs(%d : memref<4x2xf32>)
  return
}
