// RUN: kiln-opt %s -kiln-cpu-hoist-row-buffers | FileCheck %s

// The row buffer at the top of the parallel body moves to the entry block
// (one buffer per call of the function); allocas deeper in the body stay.
// CHECK-LABEL: func.func @hoist
// CHECK-NEXT: %[[ROW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
// CHECK: scf.parallel
// CHECK-NOT: memref.alloca() {alignment = 64 : i64} : memref<16xi8>
// CHECK: memref.view %[[ROW]]
// CHECK: scf.for
// CHECK-NEXT: memref.alloca() : memref<4xf32>
func.func @hoist(%out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %v = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %inner = memref.alloca() : memref<4xf32>
      memref.store %f, %inner[%j] : memref<4xf32>
      memref.store %f, %v[%c0, %j] : memref<1x4xf32>
      %w = memref.load %v[%c0, %j] : memref<1x4xf32>
      memref.store %w, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}
