// RUN: kiln-opt %s -kiln-gpu-tile-parallel-loops -kiln-gpu-fold-tiled-bounds | FileCheck %s

// After tiling, the tile loop's step folds to a constant and the thread
// loop's bound stays an affine.min with the constant tile size among its
// results (what the conversion to launches reads as the block size); the
// two loops are not merged.
// CHECK-LABEL: func.func @tiled
// CHECK-NOT: arith.muli
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK-NOT: arith.muli
// CHECK: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step (%[[C256]])
// CHECK: %[[BOUND:.*]] = affine.min #{{.*}}(%[[I]])
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[BOUND]]) step
func.func @tiled(%x: memref<1000xf32>, %y: memref<1000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1000 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<1000xf32>
    %m = arith.negf %v : f32
    memref.store %m, %y[%i] : memref<1000xf32>
    scf.reduce
  }
  return
}
