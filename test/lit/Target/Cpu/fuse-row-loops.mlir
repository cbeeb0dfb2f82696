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
// With %x and %out a donated pair (shared-args), they may be one buffer,
// but only as a whole: row %i of one is row %i of the other, so the loops
// still become one.
// SHARED-LABEL: func.func @max_then_subtract
// SHARED: scf.parallel
// SHARED-NOT: scf.parallel
// SHARED: return
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
// (kiln.shared_args): %x and %out may be one buffer, as a whole, so each
// row still reads and writes only itself.
// CHECK-LABEL: func.func @recorded_shared_args
// CHECK: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: return
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

// -----

// A donated pair where the second loop reads row 0 of what the first
// writes (%x may be %out): it needs the whole first loop done.
// CHECK-LABEL: func.func @shared_args_another_row
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK: scf.parallel
func.func @shared_args_another_row(%x: memref<8x4xf32>, %out: memref<8x4xf32>, %sum: memref<8xf32>)
    attributes {kiln.shared_args = array<i64: 0, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      memref.store %zero, %out[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %x[%c0, %i] : memref<8x4xf32>
    memref.store %v, %sum[%i] : memref<8xf32>
    scf.reduce
  }
  return
}

// -----

// An optimizer's step: the moments' updates, the bias corrections (scalar
// loads and stores of other buffers, which move before the first loop),
// then the weights' update from the new moments. Donated pairs (%m, %m2)
// and (%w, %w2) alias only as whole buffers, and the rank-0 %t and %t2
// cannot be any of them (another type): one loop over rows.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: memref.load %{{.*}}[] : memref<f32>
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @optimizer_step(%w: memref<8x4xf32>, %m: memref<8x4xf32>, %g: memref<8x4xf32>, %t: memref<f32>,
                          %m2: memref<8x4xf32>, %w2: memref<8x4xf32>, %t2: memref<f32>)
    attributes {kiln.shared_args = array<i64: 0, 1, 3, 4, 5, 6>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %b = arith.constant 0.9 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %mv = memref.load %m[%i, %j] : memref<8x4xf32>
      %gv = memref.load %g[%i, %j] : memref<8x4xf32>
      %a = arith.mulf %mv, %b : f32
      %n = arith.addf %a, %gv : f32
      memref.store %n, %m2[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  %tv = memref.load %t[] : memref<f32>
  %tn = arith.mulf %tv, %b : f32
  memref.store %tn, %t2[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %c = memref.load %t2[] : memref<f32>
    scf.for %j = %c0 to %c4 step %c1 {
      %wv = memref.load %w[%i, %j] : memref<8x4xf32>
      %mv = memref.load %m2[%i, %j] : memref<8x4xf32>
      %s = arith.mulf %mv, %c : f32
      %n = arith.subf %wv, %s : f32
      memref.store %n, %w2[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The same, but the store between the loops writes what the first loop
// reads (%g): it cannot move before it, and the loops stay apart.
// CHECK-LABEL: func.func @store_into_the_first_loops_input
// CHECK: scf.parallel
// CHECK: scf.reduce
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<8x4xf32>
// CHECK: scf.parallel
func.func @store_into_the_first_loops_input(%m: memref<8x4xf32>, %g: memref<8x4xf32>, %m2: memref<8x4xf32>,
                                             %w2: memref<8x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %b = arith.constant 0.9 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %gv = memref.load %g[%i, %j] : memref<8x4xf32>
      %n = arith.mulf %gv, %b : f32
      memref.store %n, %m2[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  memref.store %b, %g[%c0, %c0] : memref<8x4xf32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %mv = memref.load %m2[%i, %j] : memref<8x4xf32>
      memref.store %mv, %w2[%i, %j] : memref<8x4xf32>
    }
    scf.reduce
  }
  return
}
