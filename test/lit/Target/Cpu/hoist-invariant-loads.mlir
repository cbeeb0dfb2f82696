// RUN: kiln-opt %s -kiln-cpu-hoist-invariant-loads -split-input-file | FileCheck %s

// A 2-D parallel loop becomes a parallel loop over rows around a serial
// loop; the row's max (invariant in the inner loop) is loaded once per row.
// CHECK-LABEL: func.func @subtract_row_max
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NEXT: %[[M:.*]] = memref.load %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK-NEXT: scf.for %[[J:.*]] =
// CHECK-NOT: memref.load %{{.*}} : memref<4xf32>
// CHECK: arith.subf %{{.*}}, %[[M]] : f32
func.func @subtract_row_max(%x: memref<4x8xf32>, %max: memref<4xf32>, %out: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<4x8xf32>
    %m = memref.load %max[%i] : memref<4xf32>
    %d = arith.subf %v, %m : f32
    memref.store %d, %out[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  return
}

// -----

// The loop stores into the buffer it loads the invariant element from: the
// load stays in the loop.
// CHECK-LABEL: func.func @stored_in_loop
// CHECK: scf.for
// CHECK-NEXT: memref.load %{{.*}}[%{{.*}}] : memref<4xf32>
func.func @stored_in_loop(%buf: memref<4xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %j = %c0 to %c4 step %c1 {
    %m = memref.load %buf[%i] : memref<4xf32>
    memref.store %m, %buf[%j] : memref<4xf32>
  }
  return
}
