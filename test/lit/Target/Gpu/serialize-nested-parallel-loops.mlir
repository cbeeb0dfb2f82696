// RUN: kiln-opt %s -kiln-gpu-serialize-nested-parallel-loops | FileCheck %s

// A parallel loop inside a serial one that also does other work (the
// interchange does not apply): it becomes a serial loop, as the serial loop
// will run as one one-thread launch.
// CHECK-LABEL: func.func @nested
// CHECK: scf.for
// CHECK: memref.store
// CHECK: scf.for
// CHECK-NOT: scf.parallel
func.func @nested(%x: memref<8x8xf32>, %t: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c8 step %c1 {
    memref.store %zero, %t[%k] : memref<8xf32>
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      %v = memref.load %x[%k, %j] : memref<8x8xf32>
      memref.store %v, %x[%j, %k] : memref<8x8xf32>
      scf.reduce
    }
  }
  return
}
