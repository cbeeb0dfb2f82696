// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-order-reduction-loops))' -split-input-file | FileCheck %s

// A per-channel sum over [N, C, H, W] (batch norm): the channel loop moves
// outside, and H and W, contiguous in the input, merge into one loop.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @channel_sum
// CHECK: %[[X:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0], [1], [2, 3]] : memref<16x64x56x56xf32> into memref<16x64x3136xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[X]] : memref<16x64x3136xf32>) outs(%{{.*}} : memref<64xf64>)
// CHECK:   arith.extf
// CHECK:   arith.addf
func.func @channel_sum(%x: memref<16x64x56x56xf32>, %acc: memref<64xf64>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (c)>],
                  iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<16x64x56x56xf32>) outs(%acc : memref<64xf64>) {
  ^bb0(%in: f32, %out: f64):
    %e = arith.extf %in : f32 to f64
    %s = arith.addf %out, %e : f64
    linalg.yield %s : f64
  }
  return
}

// -----

// A strided operand cannot be collapsed: the loops are only reordered.
// CHECK-LABEL: func.func @strided_input
// CHECK-NOT: memref.collapse_shape
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction", "reduction", "reduction"]}
func.func @strided_input(%x: memref<4x8x6x5xf32, strided<[480, 60, 10, 1]>>, %acc: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (c)>],
                  iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<4x8x6x5xf32, strided<[480, 60, 10, 1]>>) outs(%acc : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Already kept-then-reduced (a row sum, softmax's): unchanged.
// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : memref<32x128xf32>)
func.func @row_sum(%x: memref<32x128xf32>, %acc: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<32x128xf32>) outs(%acc : memref<32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A column sum (bias gradient): its innermost loop is kept, so the
// reduction stays outside and the loads stay contiguous; unchanged.
// CHECK-LABEL: func.func @column_sum
// CHECK: iterator_types = ["reduction", "parallel"]
func.func @column_sum(%x: memref<256x512xf32>, %acc: memref<512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xf32>) outs(%acc : memref<512xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A full reduction has no kept loop to move outside: unchanged.
// CHECK-LABEL: func.func @full_sum
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["reduction", "reduction"]
func.func @full_sum(%x: memref<8x16xf32>, %acc: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<8x16xf32>) outs(%acc : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A broadcast operand read at (0, c, 0, 0) loses its unit dimensions first
// (collapsing loops cannot handle constant map results); then the loops
// reorder and H, W merge as above.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @broadcast_operand
// CHECK-DAG: %[[M:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0, 1, 2, 3]] : memref<1x64x1x1xf32> into memref<64xf32>
// CHECK-DAG: %[[X:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0], [1], [2, 3]] : memref<16x64x56x56xf32> into memref<16x64x3136xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[C]], #[[C]]], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[X]], %[[M]] : memref<16x64x3136xf32>, memref<64xf32>)
func.func @broadcast_operand(%x: memref<16x64x56x56xf32>, %m: memref<1x64x1x1xf32>, %acc: memref<64xf64>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (0, c, 0, 0)>,
                                   affine_map<(n, c, h, w) -> (c)>],
                  iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x, %m : memref<16x64x56x56xf32>, memref<1x64x1x1xf32>) outs(%acc : memref<64xf64>) {
  ^bb0(%in: f32, %mu: f32, %out: f64):
    %d = arith.subf %in, %mu : f32
    %e = arith.extf %d : f32 to f64
    %s = arith.addf %out, %e : f64
    linalg.yield %s : f64
  }
  return
}
