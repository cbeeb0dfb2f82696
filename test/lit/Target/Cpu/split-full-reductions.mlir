// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-split-full-reductions))' -split-input-file | FileCheck %s

// A sum of 512 x 512 floats into f64: the loops merge into one of 262144,
// split into 64 partial sums of 4096 (a parallel loop), then one sum of the
// 64 partials into the original accumulator.
// CHECK-LABEL: func.func @whole_sum
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<512x512xf32> into tensor<262144xf32>
// CHECK: %[[CHUNKS:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [64, 4096] : tensor<262144xf32> into tensor<64x4096xf32>
// CHECK: %[[PART:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[CHUNKS]] : tensor<64x4096xf32>) outs(%{{.*}} : tensor<64xf64>)
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]
// CHECK-SAME: ins(%[[PART]] : tensor<64xf64>) outs(%{{.*}} : tensor<f64>)
// CHECK: arith.addf
func.func @whole_sum(%x: tensor<512x512xf32>) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<f64>
  %acc = linalg.fill ins(%zero : f64) outs(%e : tensor<f64>) -> tensor<f64>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<512x512xf32>) outs(%acc : tensor<f64>) {
  ^bb0(%in: f32, %out: f64):
    %w = arith.extf %in : f32 to f64
    %v = arith.addf %out, %w : f64
    linalg.yield %v : f64
  } -> tensor<f64>
  return %s : tensor<f64>
}

// -----

// A maximum (IEEE maximumf, NaN wins): its partials start at -inf.
// CHECK-LABEL: func.func @whole_max
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]
// CHECK: arith.maximumf
func.func @whole_max(%x: tensor<65536xf32>, %acc: tensor<f32>) -> tensor<f32> {
  %s = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%x : tensor<65536xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.maximumf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Too small to split (8 x 16): one serial loop, unchanged.
// CHECK-LABEL: func.func @small_sum
// CHECK-NOT: tensor.expand_shape
// CHECK: iterator_types = ["reduction", "reduction"]
func.func @small_sum(%x: tensor<8x16xf32>, %acc: tensor<f32>) -> tensor<f32> {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A reduction that keeps a dimension is not a full one: unchanged.
// CHECK-LABEL: func.func @row_sums
// CHECK-NOT: tensor.expand_shape
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : tensor<512x512xf32>)
func.func @row_sums(%x: tensor<512x512xf32>, %acc: tensor<512xf32>) -> tensor<512xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<512x512xf32>) outs(%acc : tensor<512xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<512xf32>
  return %s : tensor<512xf32>
}
