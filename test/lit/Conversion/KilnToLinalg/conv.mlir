// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// Padding becomes tensor.pad with zeros; channels split into groups for
// linalg.conv_2d_ngchw_gfchw, whose result collapses back to NCHW.
// CHECK-LABEL: func.func @conv2d_grouped
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8x8xf32>, %[[W:.*]]: tensor<6x2x3x3xf32>)
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 1, 0] high[0, 0, 1, 2]
// CHECK: tensor.yield %[[Z]]
// CHECK: %[[XG:.*]] = tensor.expand_shape %[[P]] {{\[\[}}0], [1, 2], [3], [4]] output_shape [2, 2, 2, 10, 10]
// CHECK: %[[WG:.*]] = tensor.expand_shape %[[W]] {{\[\[}}0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3]
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x2x3x4x6xf32>)
// CHECK: %[[C:.*]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>} ins(%[[XG]], %[[WG]] : tensor<2x2x2x10x10xf32>, tensor<2x3x2x3x3xf32>) outs(%[[INIT]] : tensor<2x2x3x4x6xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[C]] {{\[\[}}0], [1, 2], [3], [4]]
// CHECK: return %[[R]] : tensor<2x6x4x6xf32>
func.func @conv2d_grouped(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x4x6xf32> {
  %0 = kiln.conv2d %x, %w strides [2, 1] pads [1, 0, 1, 2] dilations [1, 2] groups 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x6xf32>
  return %0 : tensor<2x6x4x6xf32>
}

// -----

// No padding, no pad op; bf16 widens to f32 (bit shifts) around the
// convolution.
// CHECK-LABEL: func.func @conv2d_bf16
// CHECK-NOT: tensor.pad
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x3x5x5xbf16>) outs(%{{.*}} : tensor<1x3x5x5xf32>)
// CHECK: linalg.conv_2d_ngchw_gfchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x1x3x5x5xf32>, tensor<1x2x3x1x1xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x2x5x5xf32>) outs(%{{.*}} : tensor<1x2x5x5xbf16>)
func.func @conv2d_bf16(%x: tensor<1x3x5x5xbf16>, %w: tensor<2x3x1x1xbf16>) -> tensor<1x2x5x5xbf16> {
  %0 = kiln.conv2d %x, %w strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 : tensor<1x3x5x5xbf16>, tensor<2x3x1x1xbf16> -> tensor<1x2x5x5xbf16>
  return %0 : tensor<1x2x5x5xbf16>
}
