// RUN: kiln-opt %s -kiln-gpu-resolve-dynamic-dims | FileCheck %s

// The extents of a reinterpreted argument and of an expanded buffer are the
// sizes they were built with.
// CHECK-LABEL: func.func @dims
// CHECK-SAME: %[[N:[^:]*]]: index, %[[M:[^:]*]]: index
// CHECK-NOT: memref.dim
// CHECK: return %[[N]], %[[M]]
func.func @dims(%p: memref<f32>, %flat: memref<?xf32>, %n: index, %m: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %r = memref.reinterpret_cast %p to offset: [0], sizes: [%n, 8], strides: [8, 1] : memref<f32> to memref<?x8xf32>
  %e = memref.expand_shape %flat [[0, 1]] output_shape [%m, 8] : memref<?xf32> into memref<?x8xf32>
  %a = memref.dim %r, %c0 : memref<?x8xf32>
  %b = memref.dim %e, %c0 : memref<?x8xf32>
  return %a, %b : index, index
}
