// RUN: kiln-opt %s -split-input-file \
// RUN:   -pass-pipeline='builtin.module(func.func(kiln-cpu-fuse-row-loops))' | FileCheck %s
// RUN: kiln-opt %s -split-input-file \
// RUN:   -pass-pipeline='builtin.module(func.func(kiln-cpu-fuse-row-loops{shared-args=0,1}))' \
// RUN:   | FileCheck %s --check-prefix=SHARED

// Row max, then each row minus its max: both loops touch only row %i of
// what they share, so they become one loop over rows.
// CHECK-LABEL: func.func @max_then_subtract
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<8xf32>
// CHECK: memref.load %{{.*}}[%[[I]]] : memref<8xf32>
// CHECK: scf.reduce
// CHECK-NOT: scf.parallel
// SHARED-LABEL: func.func @max_then_subtract
// SHARED: scf.parallel
// SHARED: scf.parallel
func.func @max_then_subtract(%x: memref<8x4xf32>, %out: memref<8x4xf32>, %max: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %ninf = arith.constant 0xFF800000 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %m = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %ninf) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<8x4xf32>
      %n = arith.maximumf %a, %v : f32
      scf.yield %n : f32
    }
    memref.store %m, %max[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %m = memref.load %max[%i] : memref<8xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<8x4xf32>
      %d = arith.subf %v, %m : f32
      memref.store %d, %out[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The second loop reads row 0 of what the first writes for every row: it
// needs the whole first loop done, so both stay.
// CHECK-LABEL: func.func @reads_another_row
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK: scf.parallel
func.func @reads_another_row(%x: memref<8x4xf32>, %out: memref<8x4xf32>, %max: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %zero, %max[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %m = memref.load %max[%c0] : memref<8xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      memref.store %m, %out[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The same with the donated pairs recorded by kiln-cpu-buffer-donation
// (kiln.shared_args): %x and %out may be one buffer, so the loops stay apart.
// CHECK-LABEL: func.func @recorded_shared_args
// CHECK: scf.parallel
// CHECK: scf.parallel
func.func @recorded_shared_args(%x: memref<8x4xf32>, %out: memref<8x4xf32>, %max: memref<8xf32>)
    attributes {kiln.shared_args = array<i64: 0, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %ninf = arith.constant 0xFF800000 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %m = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %ninf) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<8x4xf32>
      %n = arith.maximumf %a, %v : f32
      scf.yield %n : f32
    }
    memref.store %m, %max[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %m = memref.load %max[%i] : memref<8xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<8x4xf32>
      %d = arith.subf %v, %m : f32
      memref.store %d, %out[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  return
}
