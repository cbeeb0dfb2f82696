// RUN: kiln-opt %s -kiln-convert-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// Dynamic-shape kernels: `?` extents are built from the trailing size
// arguments named by kiln.sizes.

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[N:.*]]: index)
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x8xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]], %[[B]] : tensor<?x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<?x8xf32>)
func.func @elementwise(%x: tensor<?x8xf32>, %b: tensor<8xf32>, %n: index) -> tensor<?x8xf32>
    attributes {kiln.dynamic_sizes = 1 : i64} {
  %0 = kiln.add %x, %b {kiln.sizes = array<i64: 0, -1>} : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A fill of dynamic extents: a 0-d kiln.full broadcast to them.
// CHECK-LABEL: func.func @fill
// CHECK-SAME: (%[[N:.*]]: index)
// CHECK: %[[C:.*]] = arith.constant dense<2.500000e+00> : tensor<f32>
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x3xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[C]] : tensor<f32>) outs(%[[E]] : tensor<?x3xf32>)
func.func @fill(%n: index) -> tensor<?x3xf32> attributes {kiln.dynamic_sizes = 1 : i64} {
  %0 = kiln.full(2.500000e+00 : f32) : tensor<f32>
  %1 = kiln.broadcast_to %0 {kiln.sizes = array<i64: 0, -1>} : tensor<f32> -> tensor<?x3xf32>
  return %1 : tensor<?x3xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_over_batch
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[N:.*]]: index)
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel"]
// CHECK-SAME: ins(%[[X]] : tensor<?x4xf32>)
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
func.func @reduce_over_batch(%x: tensor<?x4xf32>, %n: index) -> (tensor<4xf32>, tensor<?x4xf32>)
    attributes {kiln.dynamic_sizes = 1 : i64} {
  %0 = kiln.reduce_sum %x axes [0] keepdim false : tensor<?x4xf32> -> tensor<4xf32>
  %1 = kiln.exp %x {kiln.sizes = array<i64: 0, -1>} : tensor<?x4xf32>
  return %0, %1 : tensor<4xf32>, tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: tensor<?x3xf32>, %[[W:.*]]: tensor<3x5xf32>, %[[N:.*]]: index)
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x5xf32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x5xf32>)
// CHECK: linalg.matmul ins(%[[A]], %[[W]] : tensor<?x3xf32>, tensor<3x5xf32>) outs(%[[Z]] : tensor<?x5xf32>)
func.func @matmul(%a: tensor<?x3xf32>, %w: tensor<3x5xf32>, %n: index) -> tensor<?x5xf32>
    attributes {kiln.dynamic_sizes = 1 : i64} {
  %0 = kiln.matmul %a, %w {kiln.sizes = array<i64: 0, -1>} : tensor<?x3xf32>, tensor<3x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<?x4x2xf32>, %[[N:.*]]: index)
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1, 2]] : tensor<?x4x2xf32> into tensor<?xf32>
// CHECK: tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [%[[N]], 8] : tensor<?xf32> into tensor<?x8xf32>
func.func @reshape(%x: tensor<?x4x2xf32>, %n: index) -> tensor<?x8xf32> attributes {kiln.dynamic_sizes = 1 : i64} {
  %0 = kiln.reshape %x {kiln.sizes = array<i64: 0, -1>} : tensor<?x4x2xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A dynamic result without kiln.sizes cannot be lowered.
func.func @missing_sizes(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{failed to legalize operation 'kiln.exp'}}
  %0 = kiln.exp %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}
