// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// Indices are clamped into range so compiled code never reads out of bounds.
// CHECK-DAG: #[[IDX:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @index_select
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x3xf32>, %[[I:.*]]: tensor<4x2xi64>)
// CHECK: linalg.generic {indexing_maps = [#[[IDX]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[I]] : tensor<4x2xi64>)
// CHECK: ^bb0(%[[V:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[D0:.*]] = linalg.index 0 : index
// CHECK: %[[HI:.*]] = arith.constant 4 : i64
// CHECK: %[[MIN:.*]] = arith.minsi %[[V]], %[[HI]] : i64
// CHECK: %[[MAX:.*]] = arith.maxsi %[[MIN]], %{{.*}} : i64
// CHECK: %[[C:.*]] = arith.index_cast %[[MAX]] : i64 to index
// CHECK: %[[D3:.*]] = linalg.index 3 : index
// CHECK: %[[E:.*]] = tensor.extract %[[X]][%[[D0]], %[[C]], %[[D3]]] : tensor<2x5x3xf32>
// CHECK: linalg.yield %[[E]] : f32
func.func @index_select(%x: tensor<2x5x3xf32>, %i: tensor<4x2xi64>) -> tensor<2x4x2x3xf32> {
  %0 = kiln.index_select %x, %i axis 1 : tensor<2x5x3xf32>, tensor<4x2xi64> -> tensor<2x4x2x3xf32>
  return %0 : tensor<2x4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[X:.*]]: tensor<2x5xf32>, %[[I:.*]]: tensor<2x3xi64>)
// CHECK: linalg.generic {{.*}} ins(%[[I]] : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK: ^bb0(%[[V:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[D0:.*]] = linalg.index 0 : index
// CHECK: arith.minsi %[[V]]
// CHECK: %[[C:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: tensor.extract %[[X]][%[[D0]], %[[C]]] : tensor<2x5xf32>
func.func @gather(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>) -> tensor<2x3xf32> {
  %0 = kiln.gather %x, %i axis 1 : tensor<2x5xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// An empty indexed axis has no valid index: the result is zeros, nothing is read.
// CHECK-LABEL: func.func @gather_from_empty
// CHECK-NOT: tensor.extract
// CHECK: linalg.fill
func.func @gather_from_empty(%x: tensor<2x0xf32>, %i: tensor<2x0xi64>, %j: tensor<3xi64>) -> tensor<3x2xf32> {
  %0 = kiln.index_select %x, %j axis 1 : tensor<2x0xf32>, tensor<3xi64> -> tensor<2x3xf32>
  %1 = kiln.permute %0 perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

// index_add: the result's loops and, innermost, a reduction over the
// indices; a row an index names gets the source's element added, the others
// keep theirs (a select, not + 0). Marked for the CPU's scatter-add call.
// CHECK-DAG: #[[J:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[SRC:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[RES:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// The result starts as a copy of the input (which may be the caller's
// tensor: never written in place).
// CHECK-LABEL: func.func @index_add
// CHECK-SAME: (%[[X:.*]]: tensor<5x3xf32>, %[[I:.*]]: tensor<4xi64>, %[[S:.*]]: tensor<4x3xf32>)
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<5x3xf32>
// CHECK: %[[INIT:.*]] = linalg.copy ins(%[[X]] : tensor<5x3xf32>) outs(%[[EMPTY]] : tensor<5x3xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[J]], #[[SRC]], #[[RES]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[I]], %[[S]] : tensor<4xi64>, tensor<4x3xf32>) outs(%[[INIT]] : tensor<5x3xf32>) attrs = {kiln.index_add = 0 : i64}
// CHECK: ^bb0(%[[V:.*]]: i64, %[[E:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[T:.*]] = arith.index_cast %[[V]] : i64 to index
// CHECK: %[[HIT:.*]] = arith.cmpi eq, %[[ROW]], %[[T]] : index
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[E]] : f32
// CHECK: %[[R:.*]] = arith.select %[[HIT]], %[[SUM]], %[[ACC]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @index_add(%x: tensor<5x3xf32>, %i: tensor<4xi64>, %s: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %0 = kiln.index_add %x, %i, %s axis 0 : tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32> -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

// scatter_add: index_add into the input flattened. The offsets: the index
// (clamped into the axis) times the axis' stride (1), plus the position
// along the other axis times its stride (5).
// CHECK-LABEL: func.func @scatter_add
// CHECK-SAME: (%[[X:.*]]: tensor<2x5xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[S:.*]]: tensor<2x3xf32>)
// CHECK: %[[OFF:.*]] = linalg.generic {{.*}} ins(%[[I]] : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3xi64>)
// CHECK: ^bb0(%[[V:.*]]: i64, %{{.*}}: i64):
// CHECK: arith.minsi %[[V]]
// CHECK: arith.maxsi
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %[[ONE]] : i64
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[ROW64:.*]] = arith.index_cast %[[ROW]] : index to i64
// CHECK: %[[FIVE:.*]] = arith.constant 5 : i64
// CHECK: %[[ALONG:.*]] = arith.muli %[[ROW64]], %[[FIVE]] : i64
// CHECK: %[[SUM:.*]] = arith.addi %[[AT]], %[[ALONG]] : i64
// CHECK: linalg.yield %[[SUM]] : i64
// CHECK-DAG: %[[FX:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1]] : tensor<2x5xf32> into tensor<10xf32>
// CHECK-DAG: %[[FO:.*]] = tensor.collapse_shape %[[OFF]] {{\[\[}}0, 1]] : tensor<2x3xi64> into tensor<6xi64>
// CHECK-DAG: %[[FS:.*]] = tensor.collapse_shape %[[S]] {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: %[[INIT:.*]] = linalg.copy ins(%[[FX]] : tensor<10xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[FO]], %[[FS]] : tensor<6xi64>, tensor<6xf32>) outs(%[[INIT]] : tensor<10xf32>) attrs = {kiln.index_add = 0 : i64}
// CHECK: tensor.expand_shape %[[R]] {{\[\[}}0, 1]] output_shape [2, 5] : tensor<10xf32> into tensor<2x5xf32>
func.func @scatter_add(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %s: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %0 = kiln.scatter_add %x, %i, %s axis 1 : tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
