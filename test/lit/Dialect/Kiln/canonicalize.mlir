// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = kiln.reshape %0 : tensor<3x2xf32> -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_back_to_same
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_back_to_same(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = kiln.reshape %0 : tensor<6xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @permute_of_permute
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[P:.*]] = kiln.permute %[[X]] perm [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT: return %[[P]]
func.func @permute_of_permute(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = kiln.permute %x perm [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = kiln.permute %0 perm [2, 0, 1] : tensor<3x2x4xf32> -> tensor<4x3x2xf32>
  return %1 : tensor<4x3x2xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_twice
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_twice(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.permute %x perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = kiln.permute %0 perm [-1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_to_same_shape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @broadcast_to_same_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.broadcast_to %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_to_twice
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[B:.*]] = kiln.broadcast_to %[[X]] : tensor<3xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[B]]
func.func @broadcast_to_twice(%x: tensor<3xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.broadcast_to %x : tensor<3xf32> -> tensor<2x3xf32>
  %1 = kiln.broadcast_to %0 : tensor<2x3xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @cast_to_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<3xi32>)
// CHECK-NEXT: return %[[X]]
func.func @cast_to_same_type(%x: tensor<3xi32>) -> tensor<3xi32> {
  %0 = kiln.cast %x : tensor<3xi32> to tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// CHECK-LABEL: func.func @add_zero_int
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xi64>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @add_zero_int(%x: tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xi64>) {
  %z = kiln.full(0) : tensor<3xi64>
  %0 = kiln.add %x, %z : tensor<2x3xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %1 = kiln.add %z, %x : tensor<3xi64>, tensor<2x3xi64> -> tensor<2x3xi64>
  return %0, %1 : tensor<2x3xi64>, tensor<2x3xi64>
}

// -----

// x + -0.0 is x for every float; x + 0.0 is not (-0.0 + 0.0 is +0.0).
// CHECK-LABEL: func.func @add_zero_float
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK: %[[Z:.*]] = kiln.full(0.000000e+00 : f64) : tensor<3xf32>
// CHECK: %[[A:.*]] = kiln.add %[[X]], %[[Z]]
// CHECK: return %[[X]], %[[A]]
func.func @add_zero_float(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %nz = kiln.full(-0.0) : tensor<3xf32>
  %z = kiln.full(0.0) : tensor<3xf32>
  %0 = kiln.add %x, %nz : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = kiln.add %x, %z : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// Dropping the zero would lose the broadcast, so this stays.
// CHECK-LABEL: func.func @add_zero_broadcasting
// CHECK: kiln.add
func.func @add_zero_broadcasting(%x: tensor<3xi32>) -> tensor<2x3xi32> {
  %z = kiln.full(0) : tensor<2x3xi32>
  %0 = kiln.add %x, %z : tensor<3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// CHECK-LABEL: func.func @sub_zero
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @sub_zero(%x: tensor<3xf32>) -> tensor<3xf32> {
  %z = kiln.full(0.0) : tensor<f32>
  %0 = kiln.sub %x, %z : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @mul_one
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<3xi8>)
// CHECK-NEXT: return %[[X]], %[[I]]
func.func @mul_one(%x: tensor<3xf32>, %i: tensor<3xi8>) -> (tensor<3xf32>, tensor<3xi8>) {
  %one = kiln.full(1.0) : tensor<3xf32>
  %ione = kiln.full(1) : tensor<i8>
  %0 = kiln.mul %one, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = kiln.mul %i, %ione : tensor<3xi8>, tensor<i8> -> tensor<3xi8>
  return %0, %1 : tensor<3xf32>, tensor<3xi8>
}

// -----

// x * 0 is 0 for integers (even when it broadcasts), not for floats (NaN, inf).
// CHECK-LABEL: func.func @mul_zero
// CHECK-SAME: (%[[X:.*]]: tensor<3xi32>, %[[F:.*]]: tensor<3xf32>)
// CHECK-DAG: %[[ZI:.*]] = kiln.full(0 : i64) : tensor<2x3xi32>
// CHECK-DAG: %[[ZF:.*]] = kiln.full(0.000000e+00 : f64) : tensor<3xf32>
// CHECK: %[[M:.*]] = kiln.mul %[[F]], %[[ZF]]
// CHECK: return %[[ZI]], %[[M]]
func.func @mul_zero(%x: tensor<3xi32>, %f: tensor<3xf32>) -> (tensor<2x3xi32>, tensor<3xf32>) {
  %z = kiln.full(0) : tensor<2x1xi32>
  %zf = kiln.full(0.0) : tensor<3xf32>
  %0 = kiln.mul %x, %z : tensor<3xi32>, tensor<2x1xi32> -> tensor<2x3xi32>
  %1 = kiln.mul %f, %zf : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1 : tensor<2x3xi32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @neg_neg(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = kiln.neg %x : tensor<3xf32>
  %1 = kiln.neg %0 : tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @fold_constants
// CHECK-DAG: %[[A:.*]] = kiln.full(5.000000e+00 : f64) : tensor<2x3xf32>
// CHECK-DAG: %[[B:.*]] = kiln.full(-6 : i64) : tensor<4xi32>
// CHECK-DAG: %[[C:.*]] = kiln.full(4 : i64) : tensor<2xui8>
// CHECK-DAG: %[[D:.*]] = kiln.full(1.0009765625 : f64) : tensor<2xf16>
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @fold_constants() -> (tensor<2x3xf32>, tensor<4xi32>, tensor<2xui8>, tensor<2xf16>) {
  %two = kiln.full(2.0) : tensor<3xf32>
  %three = kiln.full(3.0) : tensor<2x1xf32>
  %0 = kiln.add %two, %three : tensor<3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %i2 = kiln.full(2) : tensor<4xi32>
  %i3 = kiln.full(3) : tensor<4xi32>
  %m = kiln.mul %i2, %i3 : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  %1 = kiln.neg %m : tensor<4xi32>
  // ui8 wraps: 250 + 10 = 4.
  %u1 = kiln.full(250) : tensor<2xui8>
  %u2 = kiln.full(10) : tensor<2xui8>
  %2 = kiln.add %u1, %u2 : tensor<2xui8>, tensor<2xui8> -> tensor<2xui8>
  // f16 computes in f32 and rounds: 1 + 2^-10 is exact in f16.
  %h1 = kiln.full(1.0) : tensor<2xf16>
  %h2 = kiln.full(0.0009765625) : tensor<2xf16>
  %3 = kiln.add %h1, %h2 : tensor<2xf16>, tensor<2xf16> -> tensor<2xf16>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<4xi32>, tensor<2xui8>, tensor<2xf16>
}

// -----

// Small non-splat constants fold into arith.constant.
// CHECK-LABEL: func.func @fold_small_dense
// CHECK: %[[C:.*]] = arith.constant dense<[2, 3, 4]> : tensor<3xi32>
// CHECK: return %[[C]]
func.func @fold_small_dense() -> tensor<3xi32> {
  %a = arith.constant dense<[1, 2, 3]> : tensor<3xi32>
  %one = kiln.full(1) : tensor<3xi32>
  %0 = kiln.add %a, %one : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// CHECK-LABEL: func.func @fold_casts
// CHECK-DAG: kiln.full(-2 : i64) : tensor<3xi32>
// CHECK-DAG: kiln.full(true) : tensor<3xi1>
// CHECK-DAG: kiln.full(2.550000e+02 : f64) : tensor<3xf32>
func.func @fold_casts() -> (tensor<3xi32>, tensor<3xi1>, tensor<3xf32>) {
  %f = kiln.full(-2.75) : tensor<3xf32>
  %0 = kiln.cast %f : tensor<3xf32> to tensor<3xi32>
  %1 = kiln.cast %f : tensor<3xf32> to tensor<3xi1>
  %u = kiln.full(255) : tensor<3xui8>
  %2 = kiln.cast %u : tensor<3xui8> to tensor<3xf32>
  return %0, %1, %2 : tensor<3xi32>, tensor<3xi1>, tensor<3xf32>
}

// -----

// An i64 rounds to f32 once: 2^60 + 2^36 + 1 is 2^60 + 2^37 (through f64 it
// was 2^60, 1.152921504606847E+18).
// CHECK-LABEL: func.func @fold_big_int_cast
// CHECK: kiln.full(1.1529216420458004E+18 : f64) : tensor<3xf32>
func.func @fold_big_int_cast() -> tensor<3xf32> {
  %big = kiln.full(1152921573326323713) : tensor<3xi64>
  %0 = kiln.cast %big : tensor<3xi64> to tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @slice_of_slice
// CHECK-SAME: (%[[X:.*]]: tensor<10x8xf32>)
// CHECK-NEXT: %[[S:.*]] = kiln.slice %[[X]] starts [5, 2] steps [4, 1] : tensor<10x8xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return %[[S]]
func.func @slice_of_slice(%x: tensor<10x8xf32>) -> tensor<2x3xf32> {
  %0 = kiln.slice %x starts [1, 2] steps [2, 1] : tensor<10x8xf32> -> tensor<5x6xf32>
  %1 = kiln.slice %0 starts [2, 0] steps [2, 1] : tensor<5x6xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @slice_everything
// CHECK-SAME: (%[[X:.*]]: tensor<4x1xf32>)
// CHECK-NEXT: return %[[X]]
func.func @slice_everything(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %0 = kiln.slice %x starts [0, 0] steps [1, 3] : tensor<4x1xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Shape ops of splats fold to splats.
// CHECK-LABEL: func.func @shape_ops_of_splats
// CHECK-DAG: kiln.full(7 : i64) : tensor<6xi64>
// CHECK-DAG: kiln.full(7 : i64) : tensor<3x2xi64>
// CHECK-DAG: kiln.full(7 : i64) : tensor<4x2x3xi64>
// CHECK-DAG: kiln.full(7 : i64) : tensor<1x3xi64>
// CHECK-NOT: kiln.reshape
// CHECK-NOT: kiln.permute
func.func @shape_ops_of_splats() -> (tensor<6xi64>, tensor<3x2xi64>, tensor<4x2x3xi64>, tensor<1x3xi64>) {
  %c = kiln.full(7) : tensor<2x3xi64>
  %0 = kiln.reshape %c : tensor<2x3xi64> -> tensor<6xi64>
  %1 = kiln.permute %c perm [1, 0] : tensor<2x3xi64> -> tensor<3x2xi64>
  %2 = kiln.broadcast_to %c : tensor<2x3xi64> -> tensor<4x2x3xi64>
  %3 = kiln.slice %c starts [1, 0] steps [1, 1] : tensor<2x3xi64> -> tensor<1x3xi64>
  return %0, %1, %2, %3 : tensor<6xi64>, tensor<3x2xi64>, tensor<4x2x3xi64>, tensor<1x3xi64>
}
