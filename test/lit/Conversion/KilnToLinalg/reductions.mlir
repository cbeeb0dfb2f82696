// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// Float sums accumulate in f64 (like the interpreter) and round at the end;
// keepdim re-inserts the reduced axis with expand_shape.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[KEPT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @sum_keepdim
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f64) outs(%{{.*}} : tensor<2x4xf64>)
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[KEPT]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<2x4xf64>)
// CHECK: ^bb0(%[[E:.*]]: f32, %[[ACC:.*]]: f64):
// CHECK: %[[W:.*]] = arith.extf %[[E]] : f32 to f64
// CHECK: %[[S:.*]] = arith.addf %[[ACC]], %[[W]] : f64
// CHECK: linalg.yield %[[S]] : f64
// CHECK: %[[R:.*]] = linalg.generic
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: tensor.expand_shape %[[R]] {{\[}}[0], [1, 2]] output_shape [2, 1, 4] : tensor<2x4xf32> into tensor<2x1x4xf32>
func.func @sum_keepdim(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
  %0 = kiln.reduce_sum %x axes [1] keepdim true : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  return %0 : tensor<2x1x4xf32>
}

// -----

// Empty axes reduce everything.
// CHECK-LABEL: func.func @prod_all_int
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: linalg.fill ins(%[[ONE]] : i32) outs(%{{.*}} : tensor<i32>)
// CHECK: iterator_types = ["reduction", "reduction"]
// CHECK: arith.muli
func.func @prod_all_int(%x: tensor<2x3xi32>) -> tensor<i32> {
  %0 = kiln.reduce_prod %x axes [] keepdim false : tensor<2x3xi32> -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

// Max starts at -inf and is IEEE maximum (NaN wins, +0 > -0: the result
// does not depend on the order); f16 compares in f32.
// CHECK-LABEL: func.func @max_half
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NINF]] : f32)
// CHECK: ^bb0(%[[E:.*]]: f16, %[[ACC:.*]]: f32):
// CHECK: %[[W:.*]] = arith.extf %[[E]] : f16 to f32
// CHECK: %[[M:.*]] = arith.maximumf %[[ACC]], %[[W]] : f32
// CHECK: linalg.yield %[[M]] : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @max_half(%x: tensor<2x3xf16>) -> tensor<2xf16> {
  %0 = kiln.reduce_max %x axes [1] keepdim false : tensor<2x3xf16> -> tensor<2xf16>
  return %0 : tensor<2xf16>
}

// -----

// Min starts at +inf and is IEEE minimum (-0 < +0).
// CHECK-LABEL: func.func @min_f32
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: linalg.fill ins(%[[INF]] : f32)
// CHECK: ^bb0(%[[E:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[M:.*]] = arith.minimumf %[[ACC]], %[[E]] : f32
// CHECK: linalg.yield %[[M]] : f32
func.func @min_f32(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %0 = kiln.reduce_min %x axes [1] keepdim false : tensor<2x3xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// ui8 min starts at 255 and compares unsigned.
// CHECK-LABEL: func.func @min_uint
// CHECK: %[[MAX:.*]] = arith.constant -1 : i8
// CHECK: linalg.fill ins(%[[MAX]] : i8)
// CHECK: arith.minui
func.func @min_uint(%x: tensor<5xui8>) -> tensor<ui8> {
  %0 = kiln.reduce_min %x axes [0] keepdim false : tensor<5xui8> -> tensor<ui8>
  return %0 : tensor<ui8>
}

// -----

// argmax: a two-result reduction (value, index) taking strictly greater
// elements, or the first NaN.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[KEPT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @argmax
// CHECK: %[[V:.*]]:2 = linalg.generic {indexing_maps = [#[[IN]], #[[KEPT]], #[[KEPT]]], iterator_types = ["parallel", "reduction"]}
// CHECK: ^bb0(%[[E:.*]]: f32, %[[BEST:.*]]: f32, %[[BI:.*]]: i64):
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[E]], %[[BEST]] : f32
// CHECK: %[[TAKE:.*]] = arith.andi
// CHECK: %[[NB:.*]] = arith.select %[[TAKE]], %[[E]], %[[BEST]] : f32
// CHECK: %[[NI:.*]] = arith.select %[[TAKE]], %[[I64]], %[[BI]] : i64
// CHECK: linalg.yield %[[NB]], %[[NI]] : f32, i64
// CHECK: tensor.expand_shape %[[V]]#1
func.func @argmax(%x: tensor<2x3xf32>) -> tensor<2x1xi64> {
  %0 = kiln.argmax %x axis -1 keepdim true : tensor<2x3xf32> -> tensor<2x1xi64>
  return %0 : tensor<2x1xi64>
}

// -----

// CHECK-LABEL: func.func @argmin_int
// CHECK: arith.constant 2147483647 : i32
// CHECK: arith.cmpi slt
func.func @argmin_int(%x: tensor<4xi32>) -> tensor<i64> {
  %0 = kiln.argmin %x axis 0 keepdim false : tensor<4xi32> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// Bools order false < true: max starts from false and compares unsigned.
// CHECK-LABEL: func.func @max_bool
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: linalg.fill ins(%[[FALSE]] : i1)
// CHECK: arith.maxui %{{.*}}, %{{.*}} : i1
// CHECK-LABEL: func.func @argmax_bool
// CHECK: arith.constant false
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i1
func.func @max_bool(%p: tensor<4xi1>) -> tensor<i1> {
  %0 = kiln.reduce_max %p axes [0] keepdim false : tensor<4xi1> -> tensor<i1>
  return %0 : tensor<i1>
}
func.func @argmax_bool(%p: tensor<4xi1>) -> tensor<i64> {
  %0 = kiln.argmax %p axis 0 keepdim false : tensor<4xi1> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// select_last_index: equal elements are taken too, and any later NaN.
// CHECK-LABEL: func.func @argmax_last
// CHECK: %[[GE:.*]] = arith.cmpf oge, %[[E:.*]], %[[BEST:.*]] : f32
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[E]], %[[E]] : f32
// CHECK: %[[NUM:.*]] = arith.cmpf ord, %[[BEST]], %[[BEST]] : f32
// CHECK: %[[NB:.*]] = arith.andi %[[NUM]], %[[GE]] : i1
// CHECK: %[[TAKE:.*]] = arith.ori %[[NAN]], %[[NB]] : i1
// CHECK: arith.select %[[TAKE]]
func.func @argmax_last(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  %0 = kiln.argmax %x axis 1 keepdim false select_last_index : tensor<2x3xf32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @argmin_last_int
// CHECK: arith.cmpi sle
func.func @argmin_last_int(%x: tensor<4xi32>) -> tensor<i64> {
  %0 = kiln.argmin %x axis 0 keepdim false select_last_index : tensor<4xi32> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// cumsum: the result's loops and, innermost, j along the axis; j = 0 takes
// the input's first element, 0 < j <= i add in order (selects, no + 0).
// The result's initial values are never read; marked for the CPU's
// running-sum call.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[RES:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @cumsum
// CHECK-SAME: (%[[X:.*]]: tensor<2x5xf32>)
// CHECK: %[[INIT:.*]] = tensor.empty() : tensor<2x5xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[RES]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x5xf32>) outs(%[[INIT]] : tensor<2x5xf32>) attrs = {kiln.cumsum = 1 : i64}
// CHECK: ^bb0(%[[E:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[J:.*]] = linalg.index 2 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[J]], %{{.*}} : index
// CHECK: %[[UPTO:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[E]] : f32
// CHECK: %[[KEPT:.*]] = arith.select %[[UPTO]], %[[SUM]], %[[ACC]] : f32
// CHECK: %[[R:.*]] = arith.select %[[FIRST]], %[[E]], %[[KEPT]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @cumsum(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = kiln.cumsum %x axis -1 : tensor<2x5xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
