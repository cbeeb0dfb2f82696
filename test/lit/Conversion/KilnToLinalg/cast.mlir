// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// Float to integer goes through f64 and saturates, NaN to 0.
// CHECK-LABEL: func.func @float_to_int
// CHECK: %[[D:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: %[[T:.*]] = arith.fptosi %[[D]] : f64 to i8
// CHECK: %[[LO:.*]] = arith.cmpf ole, %[[D]]
// CHECK: %[[HI:.*]] = arith.cmpf oge, %[[D]]
// CHECK: %[[S:.*]] = arith.select %[[HI]], %{{.*}}, %[[T]] : i8
// CHECK: %[[S2:.*]] = arith.select %[[LO]], %{{.*}}, %[[S]] : i8
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[D]], %[[D]] : f64
// CHECK: arith.select %[[NAN]], %{{.*}}, %[[S2]] : i8
func.func @float_to_int(%x: tensor<4xf32>) -> tensor<4xi8> {
  %0 = kiln.cast %x : tensor<4xf32> to tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// CHECK-LABEL: func.func @float_to_uint
// CHECK: arith.fptoui %{{.*}} : f64 to i8
func.func @float_to_uint(%x: tensor<4xf64>) -> tensor<4xui8> {
  %0 = kiln.cast %x : tensor<4xf64> to tensor<4xui8>
  return %0 : tensor<4xui8>
}

// -----

// CHECK-LABEL: func.func @to_bool
// CHECK: arith.cmpf une
// CHECK: arith.cmpi ne
func.func @to_bool(%x: tensor<4xf16>, %i: tensor<4xi64>) {
  %0 = kiln.cast %x : tensor<4xf16> to tensor<4xi1>
  %1 = kiln.cast %i : tensor<4xi64> to tensor<4xi1>
  return
}

// -----

// Every integer converts straight to f32, rounding once like the
// interpreter (i64 through f64 would round twice).
// CHECK-LABEL: func.func @int_to_float
// CHECK-NOT: f64
// CHECK: arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[F:.*]] = arith.uitofp %{{.*}} : i8 to f32
// CHECK: arith.bitcast %[[F]] : f32 to i32
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK: arith.uitofp %{{.*}} : i1 to f32
func.func @int_to_float(%i: tensor<4xi64>, %u: tensor<4xui8>, %b: tensor<4xi1>) {
  %0 = kiln.cast %i : tensor<4xi64> to tensor<4xf32>
  %1 = kiln.cast %u : tensor<4xui8> to tensor<4xbf16>
  %2 = kiln.cast %b : tensor<4xi1> to tensor<4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @float_to_float
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: arith.bitcast %[[W]] : f32 to i32
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK: %[[N:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: arith.truncf %[[N]] : f32 to f16
// CHECK: arith.extf %{{.*}} : f32 to f64
func.func @float_to_float(%h: tensor<4xf16>, %d: tensor<4xf64>, %f: tensor<4xf32>) {
  %0 = kiln.cast %h : tensor<4xf16> to tensor<4xbf16>
  %1 = kiln.cast %d : tensor<4xf64> to tensor<4xf16>
  %2 = kiln.cast %f : tensor<4xf32> to tensor<4xf64>
  return
}

// -----

// CHECK-LABEL: func.func @int_to_int
// CHECK-SAME: (%[[I:.*]]: tensor<4xi8>, %[[U:.*]]: tensor<4xi8>, %[[L:.*]]: tensor<4xi64>)
// CHECK: arith.extsi %{{.*}} : i8 to i32
// CHECK: arith.extui %{{.*}} : i8 to i32
// CHECK: arith.trunci %{{.*}} : i64 to i8
// i8 <-> ui8 keeps the bits: no computation.
// CHECK: return %[[U]]
func.func @int_to_int(%i: tensor<4xi8>, %u: tensor<4xui8>, %l: tensor<4xi64>) -> tensor<4xi8> {
  %0 = kiln.cast %i : tensor<4xi8> to tensor<4xi32>
  %1 = kiln.cast %u : tensor<4xui8> to tensor<4xi32>
  %2 = kiln.cast %l : tensor<4xi64> to tensor<4xui8>
  %3 = kiln.cast %u : tensor<4xui8> to tensor<4xi8>
  return %3 : tensor<4xi8>
}
