// RUN: kiln-opt %s -kiln-cpu-row-buffers-into-outputs -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-row-buffers-into-outputs=shared-args=0,1 -split-input-file | FileCheck %s --check-prefix=SHARED

// A softmax row: the exp row is written where the scale loop stores it, in
// row %i of %out, and scaled there in place; no row buffer is left.
// CHECK-LABEL: func.func @softmax_row
// CHECK-NOT: memref.alloca() {{.*}} : memref<16xi8>
// CHECK: scf.parallel (%[[I:[a-z0-9_]+]]) =
// CHECK: %[[S:[a-z0-9_]+]] = scf.for %[[J:[a-z0-9_]+]] = {{.*}} -> (f32)
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[OUT:[a-z0-9_]+]][%[[I]], %[[J]]] : memref<2x4xf32>
// CHECK: memref.load %[[OUT]][%[[I]], %[[J]]] : memref<2x4xf32>
// CHECK: scf.for %[[K:[a-z0-9_]+]] =
// CHECK: %[[V:[a-z0-9_]+]] = memref.load %[[OUT]][%[[I]], %[[K]]] : memref<2x4xf32>
// CHECK: %[[W:[a-z0-9_]+]] = arith.mulf %[[V]]
// CHECK: memref.store %[[W]], %[[OUT]][%[[I]], %[[K]]] : memref<2x4xf32>
// Donated pairs may share a buffer: writing the output early could
// clobber the input row the loop still reads, so the buffer stays.
// SHARED-LABEL: func.func @softmax_row
// SHARED: memref.alloca() {{.*}} : memref<16xi8>
// SHARED: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<1x4xf32>
func.func @softmax_row(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    %e3 = memref.view %row[%c0][] : memref<16xi8> to memref<1x1x4xf32>
    %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %w = math.exp %v : f32
      memref.store %w, %e[%c0, %j] : memref<1x4xf32>
      %r = memref.load %e3[%c0, %c0, %j] : memref<1x1x4xf32>
      %n = arith.addf %a, %r : f32
      scf.yield %n : f32
    }
    %inv = arith.divf %one, %s : f32
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %e[%c0, %j] : memref<1x4xf32>
      %w = arith.mulf %v, %inv : f32
      memref.store %w, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The output's rows as [2, 1, 4] (a keepdim result): the row is %out[%i, 0, j].
// CHECK-LABEL: func.func @unit_middle_dim
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x1x4xf32>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x1x4xf32>
// CHECK-NOT: memref<1x4xf32>
func.func @unit_middle_dim(%x: memref<2x4xf32>, %out: memref<2x1x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %e[%c0, %j] : memref<1x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %e[%c0, %j] : memref<1x4xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %out[%i, %c0, %j] : memref<2x1x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The row loop also reads the output: early writes would change what it
// reads, so the buffer stays.
// CHECK-LABEL: func.func @output_read_in_loop
// CHECK: memref.alloca() {{.*}} : memref<16xi8>
func.func @output_read_in_loop(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %o = memref.load %out[%i, %j] : memref<2x4xf32>
      %w = arith.addf %v, %o : f32
      memref.store %w, %e[%c0, %j] : memref<1x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %e[%c0, %j] : memref<1x4xf32>
      memref.store %v, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The last reader stores element j at another element of the row (a
// reversal): in place it would read elements it already overwrote.
// CHECK-LABEL: func.func @reversed_row
// CHECK: memref.alloca() {{.*}} : memref<16xi8>
func.func @reversed_row(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      memref.store %v, %e[%c0, %j] : memref<1x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %k = arith.subi %c3, %j : index
      %v = memref.load %e[%c0, %k] : memref<1x4xf32>
      memref.store %v, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The last reader stores a shorter row than the buffer's: the rest of the
// output row would keep the temporary, so the buffer stays.
// CHECK-LABEL: func.func @partial_row
// CHECK: memref.alloca() {{.*}} : memref<16xi8>
func.func @partial_row(%x: memref<2x4xf32>, %out: memref<2x2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      memref.store %v, %e[%c0, %j] : memref<1x4xf32>
    }
    scf.for %j = %c0 to %c2 step %c1 {
      %v = memref.load %e[%c0, %j] : memref<1x4xf32>
      memref.store %v, %out[%i, %j] : memref<2x2xf32>
    }
    scf.reduce
  }
  return
}

// -----

// The output row streams (kiln-cpu-streaming-stores marked its store
// non-temporal): the exp row stays in its buffer, and the scale loop reads
// the buffer and streams the row out.
// CHECK-LABEL: func.func @streamed_row
// CHECK: memref.alloca() {{.*}} : memref<16xi8>
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<1x4xf32>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<1x4xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {nontemporal = true} : memref<2x4xf32>
func.func @streamed_row(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
    %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
    %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %w = math.exp %v : f32
      memref.store %w, %e[%c0, %j] : memref<1x4xf32>
      %n = arith.addf %a, %w : f32
      scf.yield %n : f32
    }
    %inv = arith.divf %one, %s : f32
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %e[%c0, %j] : memref<1x4xf32>
      %w = arith.mulf %v, %inv : f32
      memref.store %w, %out[%i, %j] {nontemporal = true} : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}
