// RUN: kiln-opt %s -kiln-cpu-fuse-loops-in-rows -split-input-file | FileCheck %s

// Softmax row: the exp loop (stores the row) and the sum loop (reads it at
// the same element, through another view of the same buffer) become one
// loop; the max loop before and the scale loop after stay (they need a
// finished reduction). The accumulator's initial store moves before the
// merged loop.
// CHECK-LABEL: func.func @softmax_row
// CHECK: scf.parallel
// CHECK: %[[MAX:.*]] = scf.for {{.*}} iter_args({{.*}}) -> (f32)
// CHECK: memref.store %{{.*}}, %[[ACC:.*]][%{{.*}}] : memref<1xf32>
// CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = {{.*}} iter_args(%[[A:.*]] = %{{.*}}) -> (f32)
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %[[J]]] : memref<1x4xf32>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %[[J]]] : memref<1x1x4xf32>
// CHECK: arith.addf %[[A]]
// CHECK: scf.yield
// CHECK: arith.divf %{{.*}}, %[[SUM]]
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK: scf.reduce
func.func @softmax_row(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
  %acc = memref.alloca() : memref<1xf32>
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    %e3 = memref.view %row[%c0][] : memref<16xi8> to memref<1x1x4xf32>
    %m = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %ninf) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %n = arith.maximumf %a, %v : f32
      scf.yield %n : f32
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %d = arith.subf %v, %m : f32
      %w = math.exp %d : f32
      memref.store %w, %e[%c0, %j] : memref<1x4xf32>
    }
    memref.store %zero, %acc[%c0] : memref<1xf32>
    %init = memref.load %acc[%c0] : memref<1xf32>
    %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %init) -> (f32) {
      %w = memref.load %e3[%c0, %c0, %j] : memref<1x1x4xf32>
      %n = arith.addf %a, %w : f32
      scf.yield %n : f32
    }
    %r = arith.divf %one, %s : f32
    scf.for %j = %c0 to %c4 step %c1 {
      %w = memref.load %e[%c0, %j] : memref<1x4xf32>
      %y = arith.mulf %w, %r : f32
      memref.store %y, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The second loop reads another element of what the first writes (a shift):
// merging would read it before it is written, so both loops stay.
// CHECK-LABEL: func.func @shifted
// CHECK: scf.for
// CHECK: scf.for
func.func @shifted(%x: memref<2x5xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %row = memref.alloca() : memref<5xf32>
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x5xf32>
      memref.store %v, %row[%j] : memref<5xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %k = arith.addi %j, %c1 : index
      %w = memref.load %row[%k] : memref<5xf32>
      memref.store %w, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// x (argument 0) is donated to y (argument 2, kiln.shared_args): one buffer
// at run time. The first loop reads x reversed, the second writes y: merged,
// iteration j would write element j before iteration 3 - j reads it. Both
// loops stay.
// CHECK-LABEL: func.func @donated_pair_read_reversed
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.reduce
func.func @donated_pair_read_reversed(%x: memref<2x4xf32>, %z: memref<2x4xf32>, %y: memref<2x4xf32>)
    attributes {kiln.shared_args = array<i64: 0, 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %r = arith.subi %c3, %j : index
      %v = memref.load %x[%i, %r] : memref<2x4xf32>
      memref.store %v, %z[%i, %j] : memref<2x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %n = arith.negf %v : f32
      memref.store %n, %y[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The same pair read and written at the same element in the same
// iteration (an in-place update): the loops merge.
// CHECK-LABEL: func.func @donated_pair_same_element
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK: scf.reduce
func.func @donated_pair_same_element(%x: memref<2x4xf32>, %z: memref<2x4xf32>, %y: memref<2x4xf32>)
    attributes {kiln.shared_args = array<i64: 0, 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %z[%i, %j] : memref<2x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %n = arith.negf %v : f32
      memref.store %n, %y[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}
