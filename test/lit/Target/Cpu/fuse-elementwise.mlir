// RUN: kiln-opt %s -kiln-cpu-fuse-elementwise -split-input-file | FileCheck %s

// exp then negf, each element read once: one generic computes both.
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NEXT: arith.negf
// CHECK-NOT: linalg.generic
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = arith.negf %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// The consumer reads the producer through a broadcast (each tanh 4 times):
// fusing would recompute it per broadcast element, so both stay.
#vec = affine_map<(d0) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#bcast = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @broadcast
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK: linalg.generic
// CHECK-NOT: math.tanh
// CHECK: arith.addf
func.func @broadcast(%x: tensor<8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %t = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.tanh %in : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#bcast, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : tensor<8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// A matmul is never fused or generalised (it becomes a GEMM call later).
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: math.exp
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x4xf32>) outs(%e1 : tensor<4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// A batch norm's d = x - mu (one full input, a broadcast mean) feeds a sum
// of squares and an elementwise scale: each consumer gets its own copy, so
// d is never written out; the reduction over N, H, W is not reshaped.
#id4 = affine_map<(n, c, h, w) -> (n, c, h, w)>
#ch4 = affine_map<(n, c, h, w) -> (0, c, 0, 0)>
#acc = affine_map<(n, c, h, w) -> (c)>
// CHECK-LABEL: func.func @recomputed_difference
// CHECK-NOT: tensor.expand_shape
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>, tensor<1x3x1x1xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @recomputed_difference(%x: tensor<2x3x4x5xf32>, %mu: tensor<1x3x1x1xf32>, %s: tensor<1x3x1x1xf32>)
    -> (tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x4x5xf32>
  %d = linalg.generic {indexing_maps = [#id4, #ch4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %mu : tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>) outs(%e : tensor<2x3x4x5xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %v = arith.subf %a, %m : f32
    linalg.yield %v : f32
  } -> tensor<2x3x4x5xf32>
  %ea = tensor.empty() : tensor<3xf32>
  %fa = linalg.fill ins(%zero : f32) outs(%ea : tensor<3xf32>) -> tensor<3xf32>
  %sq = linalg.generic {indexing_maps = [#id4, #acc], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%d : tensor<2x3x4x5xf32>) outs(%fa : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.mulf %a, %a : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<3xf32>
  %var = tensor.expand_shape %sq [[0, 1, 2, 3]] output_shape [1, 3, 1, 1] : tensor<3xf32> into tensor<1x3x1x1xf32>
  %e2 = tensor.empty() : tensor<2x3x4x5xf32>
  %y = linalg.generic {indexing_maps = [#id4, #ch4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%d, %s : tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>) outs(%e2 : tensor<2x3x4x5xf32>) {
  ^bb0(%a: f32, %k: f32, %o: f32):
    %v = arith.mulf %a, %k : f32
    linalg.yield %v : f32
  } -> tensor<2x3x4x5xf32>
  return %y, %var : tensor<2x3x4x5xf32>, tensor<1x3x1x1xf32>
}

// -----

// An exp used twice stays one producer (softmax's row temporary): math
// calls are not recomputed.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @exp_not_recomputed
// CHECK-COUNT-1: math.exp
// CHECK-NOT: math.exp
func.func @exp_not_recomputed(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = arith.addf %o, %in : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = arith.negf %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return %neg, %sum : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// A batch norm's backward sums dy and dy * x over N, H and W: two
// reductions over the same loops reading dy the same way run as one generic
// with two results (one pass over dy and x).
#id4 = affine_map<(n, c, h, w) -> (n, c, h, w)>
#acc = affine_map<(n, c, h, w) -> (c)>
// CHECK-LABEL: func.func @sibling_sums
// CHECK: %[[BOTH:.*]]:2 = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>)
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[BOTH]]#0, %[[BOTH]]#1
func.func @sibling_sums(%dy: tensor<2x3x4x5xf32>, %x: tensor<2x3x4x5xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.generic {indexing_maps = [#id4, #acc], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%dy : tensor<2x3x4x5xf32>) outs(%f : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<3xf32>
  %sx = linalg.generic {indexing_maps = [#id4, #id4, #acc], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%dy, %x : tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) outs(%f : tensor<3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<3xf32>
  return %s, %sx : tensor<3xf32>, tensor<3xf32>
}

// -----

// Row sums (softmax's, layer_norm's) keep a generic each: their row loops
// are fused later, each reduction with the elementwise loops of its rows.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_sums_stay_apart
// CHECK-COUNT-2: linalg.generic
func.func @row_sums_stay_apart(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %s, %m : tensor<4xf32>, tensor<4xf32>
}
