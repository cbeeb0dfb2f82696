// RUN: kiln-opt %s -kiln-gpu-splat-globals-to-fills | FileCheck %s

// A splat constant (a `full` output) is filled on the device; a global
// that is not a splat stays.
// CHECK-LABEL: func.func @k
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: %[[V:.*]] = arith.constant 2.500000e+00 : f32
// CHECK: linalg.fill ins(%[[V]] : f32) outs(%[[BUF]] : memref<4x4xf32>)
// CHECK: memref.copy %[[BUF]]
// CHECK: memref.get_global @ramp
memref.global "private" constant @twos : memref<4x4xf32> = dense<2.5>
memref.global "private" constant @ramp : memref<2xf32> = dense<[1.0, 2.0]>
func.func @k(%out: memref<4x4xf32>, %r: memref<2xf32>) {
  %g = memref.get_global @twos : memref<4x4xf32>
  memref.copy %g, %out : memref<4x4xf32> to memref<4x4xf32>
  %h = memref.get_global @ramp : memref<2xf32>
  memref.copy %h, %r : memref<2xf32> to memref<2xf32>
  return
}
