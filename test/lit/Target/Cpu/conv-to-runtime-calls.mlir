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

// -----

// A zero-padded copy of the input (tensor.pad bufferized: a zero-filled
// buffer, the input copied into its interior) is dropped: the call reads
// the unpadded input and takes the paddings (top 1, left 2, bottom 1,
// right 0) as arguments.
// CHECK-LABEL: func.func @padded
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: %[[X:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK: call @kiln_rt_conv2d_f32(%[[X]], {{.*}}, %[[ONE]], %[[TWO]], %[[ONE]], %[[ZERO]], %[[ZERO]]) : (
// CHECK-NOT: memref.copy
func.func @padded(%x: memref<1x1x2x5x5xf32>, %w: memref<1x4x2x3x3xf32>, %o: memref<1x1x4x5x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<1x1x2x7x7xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<1x1x2x7x7xf32>)
  %interior = memref.subview %p[0, 0, 0, 1, 2] [1, 1, 2, 5, 5] [1, 1, 1, 1, 1]
      : memref<1x1x2x7x7xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 9>>
  memref.copy %x, %interior : memref<1x1x2x5x5xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 9>>
  linalg.fill ins(%zero : f32) outs(%o : memref<1x1x4x5x5xf32>)
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %w : memref<1x1x2x7x7xf32>, memref<1x4x2x3x3xf32>) outs(%o : memref<1x1x4x5x5xf32>)
  return
}

// -----

// The input is overwritten between the copy and the convolution: the call
// must read the copy, which keeps the input's old values.
// CHECK-LABEL: func.func @input_written_after_the_copy
// CHECK: memref.copy
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg0 :
// CHECK: call @kiln_rt_conv2d_f32(
func.func @input_written_after_the_copy(%x: memref<1x1x2x5x5xf32>, %w: memref<1x4x2x3x3xf32>, %o: memref<1x1x4x5x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %seven = arith.constant 7.0 : f32
  %p = memref.alloc() : memref<1x1x2x7x7xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<1x1x2x7x7xf32>)
  %interior = memref.subview %p[0, 0, 0, 1, 1] [1, 1, 2, 5, 5] [1, 1, 1, 1, 1]
      : memref<1x1x2x7x7xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 8>>
  memref.copy %x, %interior : memref<1x1x2x5x5xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 8>>
  linalg.fill ins(%seven : f32) outs(%x : memref<1x1x2x5x5xf32>)
  linalg.fill ins(%zero : f32) outs(%o : memref<1x1x4x5x5xf32>)
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %w : memref<1x1x2x7x7xf32>, memref<1x4x2x3x3xf32>) outs(%o : memref<1x1x4x5x5xf32>)
  return
}

// -----

// Writes between the copy and the convolution to other buffers (the
// output's fill, a second convolution) leave the copy droppable.
// CHECK-LABEL: func.func @other_writes_between
// CHECK-NOT: memref.copy
// CHECK: call @kiln_rt_conv2d_f32(
// CHECK: call @kiln_rt_conv2d_f32(
// CHECK-NOT: memref.copy
func.func @other_writes_between(%x: memref<1x1x2x5x5xf32>, %w: memref<1x4x2x3x3xf32>, %o: memref<1x1x4x5x5xf32>,
                                %o2: memref<1x1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<1x1x2x7x7xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<1x1x2x7x7xf32>)
  %interior = memref.subview %p[0, 0, 0, 1, 1] [1, 1, 2, 5, 5] [1, 1, 1, 1, 1]
      : memref<1x1x2x7x7xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 8>>
  memref.copy %x, %interior : memref<1x1x2x5x5xf32> to memref<1x1x2x5x5xf32, strided<[98, 98, 49, 7, 1], offset: 8>>
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : memref<1x1x2x5x5xf32>, memref<1x4x2x3x3xf32>) outs(%o2 : memref<1x1x4x3x3xf32>)
  linalg.fill ins(%zero : f32) outs(%o : memref<1x1x4x5x5xf32>)
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %w : memref<1x1x2x7x7xf32>, memref<1x4x2x3x3xf32>) outs(%o : memref<1x1x4x5x5xf32>)
  return
}
