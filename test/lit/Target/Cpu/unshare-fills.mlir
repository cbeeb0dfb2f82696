// RUN: kiln-opt %s -kiln-cpu-unshare-fills -split-input-file | FileCheck %s

// Two reductions share one fill (CSE merged theirs): the second gets its
// own fill of its own empty, so bufferization needs no copy.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @two_sums
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf64>
// CHECK: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f64) outs(%[[E1]] : tensor<4xf64>)
// CHECK: linalg.generic {{.*}} outs(%[[F1]] : tensor<4xf64>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf64>
// CHECK: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f64) outs(%[[E2]] : tensor<4xf64>)
// CHECK: linalg.generic {{.*}} outs(%[[F2]] : tensor<4xf64>)
func.func @two_sums(%x: tensor<4x8xf64>) -> (tensor<4xf64>, tensor<4xf64>) {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<4xf64>
  %f = linalg.fill ins(%zero : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf64>) outs(%f : tensor<4xf64>) {
  ^bb0(%in: f64, %acc: f64):
    %a = arith.addf %acc, %in : f64
    linalg.yield %a : f64
  } -> tensor<4xf64>
  %q = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf64>) outs(%f : tensor<4xf64>) {
  ^bb0(%in: f64, %acc: f64):
    %m = arith.mulf %in, %in : f64
    %a = arith.addf %acc, %m : f64
    linalg.yield %a : f64
  } -> tensor<4xf64>
  return %s, %q : tensor<4xf64>, tensor<4xf64>
}

// -----

// A fill with one user stays as it is.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @one_user
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
func.func @one_user(%x: tensor<4x8xf64>) -> tensor<4xf64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<4xf64>
  %f = linalg.fill ins(%zero : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf64>) outs(%f : tensor<4xf64>) {
  ^bb0(%in: f64, %acc: f64):
    %a = arith.addf %acc, %in : f64
    linalg.yield %a : f64
  } -> tensor<4xf64>
  return %s : tensor<4xf64>
}
