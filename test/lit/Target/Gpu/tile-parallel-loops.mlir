// RUN: kiln-opt %s -kiln-gpu-tile-parallel-loops -split-input-file | FileCheck %s

// A 2-D nest: tiles of 8 x 32 threads (the contiguous dimension gets 32).
// CHECK-LABEL: func.func @small
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %[[C8]]
// CHECK: %[[COLS:.*]] = arith.muli %{{.*}}, %[[C32]]
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %{{.*}}) step (%[[ROWS]], %[[COLS]])
// CHECK: scf.parallel
// CHECK: arith.negf
func.func @small(%x: memref<100x1000xf32>, %y: memref<100x1000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  %c1000 = arith.constant 1000 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c100, %c1000) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<100x1000xf32>
    %n = arith.negf %v : f32
    memref.store %n, %y[%i, %j] : memref<100x1000xf32>
    scf.reduce
  }
  return
}

// -----

// 2^20 + 3 elements: tiles of 1024 elements, 256 threads each computing 4
// elements 256 apart; a full tile loads all four before the first negf and
// stores after the last; the edge tile guards each copy.
// CHECK-LABEL: func.func @large
// CHECK: %[[C1024:.*]] = arith.constant 1024 : index
// CHECK: %[[TILE:.*]] = arith.muli %{{.*}}, %[[C1024]]
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%[[TILE]])
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[C256]]) step
// CHECK: %[[FULL:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}}
// CHECK: scf.if %[[FULL]] {
// CHECK-COUNT-4: memref.load
// CHECK-COUNT-4: arith.negf
// CHECK-COUNT-4: memref.store
// CHECK: } else {
// CHECK-COUNT-4: scf.if
func.func @large(%x: memref<1048579xf32>, %y: memref<1048579xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1048579 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<1048579xf32>
    %m = arith.negf %v : f32
    memref.store %m, %y[%i] : memref<1048579xf32>
    scf.reduce
  }
  return
}
