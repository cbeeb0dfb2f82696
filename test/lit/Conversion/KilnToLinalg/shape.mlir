// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[Y:.*]]: tensor<2x3xf32>, %[[S:.*]]: tensor<f32>)
// CHECK: tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK: tensor.expand_shape %[[X]] {{\[}}[0], [1], [2, 3]] output_shape [2, 3, 2, 2] : tensor<2x3x4xf32> into tensor<2x3x2x2xf32>
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[Y]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [3, 2] : tensor<6xf32> into tensor<3x2xf32>
// CHECK: tensor.expand_shape %[[S]] [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
func.func @reshape(%x: tensor<2x3x4xf32>, %y: tensor<2x3xf32>, %s: tensor<f32>) {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %2 = kiln.reshape %y : tensor<2x3xf32> -> tensor<3x2xf32>
  %3 = kiln.reshape %s : tensor<f32> -> tensor<1x1xf32>
  return
}

// -----

// CHECK-LABEL: func.func @permute
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK: linalg.transpose ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[E]] : tensor<4x2x3xf32>) permutation = [2, 0, 1]
func.func @permute(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.permute %x perm [-1, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (0, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @broadcast_to
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK: ^bb0(%[[E:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[E]] : f32
func.func @broadcast_to(%x: tensor<1x3xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.broadcast_to %x : tensor<1x3xf32> -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<6x5xf32>)
// CHECK: tensor.extract_slice %[[X]][1, 0] [2, 5] [3, 1] : tensor<6x5xf32> to tensor<2x5xf32>
func.func @slice(%x: tensor<6x5xf32>) -> tensor<2x5xf32> {
  %0 = kiln.slice %x starts [1, 0] steps [3, 1] : tensor<6x5xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xi8>, %[[B:.*]]: tensor<2x1xi8>)
// CHECK: tensor.concat dim(1) %[[A]], %[[B]] : (tensor<2x3xi8>, tensor<2x1xi8>) -> tensor<2x4xi8>
func.func @concat(%a: tensor<2x3xui8>, %b: tensor<2x1xui8>) -> tensor<2x4xui8> {
  %0 = kiln.concat %a, %b axis -1 : tensor<2x3xui8>, tensor<2x1xui8> -> tensor<2x4xui8>
  return %0 : tensor<2x4xui8>
}
