// RUN: kiln-opt %s -kiln-cpu-conv-to-runtime-calls -cse -split-input-file | FileCheck %s

// An f32 convolution after a zero fill of its output: one call that
// overwrites the output (last argument 0), the fill dropped.
// CHECK-LABEL: func.func private @kiln_rt_conv2d_f32
// CHECK-LABEL: func.func @conv
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
// CHECK: %[[OVERWRITE:.*]] = arith.constant 0 : i64
// CHECK: call @kiln_rt_conv2d_f32({{.*}}, %[[OVERWRITE]]) : (
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
func.func @conv(%x: memref<1x1x2x5x5xf32>, %w: memref<1x4x2x3x3xf32>, %o: memref<1x1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%o : memref<1x1x4x3x3xf32>)
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : memref<1x1x2x5x5xf32>, memref<1x4x2x3x3xf32>) outs(%o : memref<1x1x4x3x3xf32>)
  return
}

// -----

// No fill before: the call accumulates into the output (last argument 1).
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[ACCUMULATE:.*]] = arith.constant 1 : i64
// CHECK: call @kiln_rt_conv2d_f32({{.*}}, %[[ACCUMULATE]]) : (
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
func.func @accumulate(%x: memref<1x1x2x5x5xf32>, %w: memref<1x4x2x3x3xf32>, %o: memref<1x1x4x3x3xf32>) {
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : memref<1x1x2x5x5xf32>, memref<1x4x2x3x3xf32>) outs(%o : memref<1x1x4x3x3xf32>)
  return
}

// -----

// f64 convolutions stay linalg (they become loops); nothing is declared.
// CHECK-NOT: kiln_rt_conv2d_f32
// CHECK-LABEL: func.func @conv_f64
// CHECK: linalg.conv_2d_ngchw_gfchw
// CHECK-NOT: call
func.func @conv_f64(%x: memref<1x1x2x5x5xf64>, %w: memref<1x4x2x3x3xf64>, %o: memref<1x1x4x3x3xf64>) {
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : memref<1x1x2x5x5xf64>, memref<1x4x2x3x3xf64>) outs(%o : memref<1x1x4x3x3xf64>)
  return
}
