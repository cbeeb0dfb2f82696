// RUN: kiln-opt %s -kiln-gpu-flatten-dynamic-views | FileCheck %s

// A 2-D view of dynamic extents becomes a 1-D view of n * 24 elements
// expanded to [n, 24]; a 1-D view stays.
// CHECK-LABEL: func.func @views
// CHECK-SAME: %[[N:[^:]*]]: index
// CHECK: %[[C24:.*]] = arith.constant 24 : index
// CHECK: %[[COUNT:.*]] = arith.muli %[[N]], %[[C24]]
// CHECK: %[[FLAT:.*]] = memref.view %{{.*}}[%{{.*}}][%[[COUNT]]] : memref<?xi8> to memref<?xf32>
// CHECK: %[[ND:.*]] = memref.expand_shape %[[FLAT]] {{\[\[}}0, 1]] output_shape [%[[N]], 24] : memref<?xf32> into memref<?x24xf32>
// CHECK: memref.load %[[ND]]
// CHECK: memref.view %{{.*}}[%{{.*}}][%[[N]]] : memref<?xi8> to memref<?xf32>
func.func @views(%scratch: memref<?xi8>, %n: index, %shift: index) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.view %scratch[%shift][%n] : memref<?xi8> to memref<?x24xf32>
  %x = memref.load %v[%c0, %c0] : memref<?x24xf32>
  %w = memref.view %scratch[%c0][%n] : memref<?xi8> to memref<?xf32>
  memref.store %x, %w[%c0] : memref<?xf32>
  return %x : f32
}
