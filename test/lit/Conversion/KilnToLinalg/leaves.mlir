// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @full
// CHECK-DAG: arith.constant dense<1.500000e+00> : tensor<2x3xf32>
// CHECK-DAG: arith.constant dense<-56> : tensor<3xi8>
// CHECK-DAG: arith.constant dense<true> : tensor<2xi1>
// CHECK-DAG: arith.constant dense<3.000000e+00> : tensor<2xbf16>
// CHECK-DAG: arith.constant dense<1.000000e+00> : tensor<2xf16>
// CHECK-DAG: arith.constant dense<-5> : tensor<2xi8>
// CHECK-DAG: arith.constant dense<-1> : tensor<2xi32>
func.func @full() -> (tensor<2x3xf32>, tensor<3xui8>, tensor<2xi1>, tensor<2xbf16>, tensor<2xf16>, tensor<2xi8>, tensor<2xi32>) {
  %0 = kiln.full(1.5) : tensor<2x3xf32>
  %1 = kiln.full(200 : ui8) : tensor<3xui8>
  %2 = kiln.full(5) : tensor<2xi1>
  %3 = kiln.full(3.0) : tensor<2xbf16>
  // Values typed like the result's elements, as the Trace importer writes them.
  %4 = kiln.full(0x3C00 : f16) : tensor<2xf16>
  %5 = kiln.full(-5 : i8) : tensor<2xi8>
  %6 = kiln.full(-1 : i32) : tensor<2xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<3xui8>, tensor<2xi1>, tensor<2xbf16>, tensor<2xf16>, tensor<2xi8>, tensor<2xi32>
}

// -----

// Large splats are a loop yielding the scalar, never a stored dense constant
// (which would become a global of every element in the kernel's object).
// CHECK-LABEL: func.func @full_large
// CHECK-NOT: dense
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2048x2048xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<2048x2048xf32>)
// CHECK: %[[C:.*]] = arith.constant 2.500000e+00 : f32
// CHECK: linalg.yield %[[C]] : f32
// CHECK: tensor.empty() : tensor<2147483648x2147483648xi8>
// CHECK: arith.constant -56 : i8
// CHECK-NOT: dense
// CHECK: return
func.func @full_large() -> (tensor<2048x2048xf32>, tensor<2147483648x2147483648xui8>) {
  %0 = kiln.full(2.5) : tensor<2048x2048xf32>
  %1 = kiln.full(200 : ui8) : tensor<2147483648x2147483648xui8>
  return %0, %1 : tensor<2048x2048xf32>, tensor<2147483648x2147483648xui8>
}

// -----

// Element i is start + i * step in f64, then cast (saturating for integers).
// CHECK-LABEL: func.func @arange
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[D:.*]] = arith.sitofp %[[I64]] : i64 to f64
// CHECK: %[[M:.*]] = arith.mulf %[[D]], %{{.*}} : f64
// CHECK: %[[V:.*]] = arith.addf %{{.*}}, %[[M]] : f64
// CHECK: arith.fptosi %[[V]] : f64 to i32
// CHECK: linalg.yield %{{.*}} : i32
func.func @arange() -> tensor<5xi32> {
  %0 = kiln.arange start 1.0 step 2.5 : tensor<5xi32>
  return %0 : tensor<5xi32>
}

// -----

// The SplitMix64 hash of runtime/core/Random.h over the linear index.
// CHECK-LABEL: func.func @rand_uniform
// CHECK: linalg.generic
// CHECK-DAG: arith.constant -7046029254386353131 : i64
// CHECK-DAG: arith.constant -4658895280553007687 : i64
// CHECK-DAG: arith.constant -7723592293110705685 : i64
// CHECK: arith.shrui
// CHECK: %[[TOP:.*]] = arith.shrui %{{.*}}, %{{.*}} : i64
// CHECK: %[[U:.*]] = arith.uitofp %[[TOP]] : i64 to f64
// CHECK: %[[S:.*]] = arith.mulf %[[U]], %{{.*}} : f64
// CHECK: arith.truncf %[[S]] : f64 to f32
func.func @rand_uniform() -> tensor<2x3xf32> {
  %0 = kiln.rand_uniform seed 42 : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Box-Muller in f64 with math.log, math.sqrt and math.cos; f16 rounds through f32.
// CHECK-LABEL: func.func @rand_normal
// CHECK: linalg.generic
// CHECK: %[[L:.*]] = math.log %{{.*}} : f64
// CHECK: %[[R:.*]] = math.sqrt %{{.*}} : f64
// CHECK: %[[C:.*]] = math.cos %{{.*}} : f64
// CHECK: %[[N:.*]] = arith.mulf %[[R]], %[[C]] : f64
// CHECK: %[[F:.*]] = arith.truncf %[[N]] : f64 to f32
// CHECK: arith.truncf %[[F]] : f32 to f16
func.func @rand_normal() -> tensor<4xf16> {
  %0 = kiln.rand_normal seed 7 : tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Folded non-splat constants of ui8 become i8 constants.
// CHECK-LABEL: func.func @ui8_constant
// CHECK: arith.constant dense<[1, -1]> : tensor<2xi8>
func.func @ui8_constant() -> tensor<2xui8> {
  %0 = arith.constant dense<[1, 255]> : tensor<2xui8>
  return %0 : tensor<2xui8>
}
