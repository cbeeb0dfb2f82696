// RUN: kiln-opt %s -kiln-cpu-localize-row-scratch -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-localize-row-scratch=max-row-bytes=64 -split-input-file | FileCheck %s --check-prefix=SMALL

// A softmax-like row loop: the exp row and the row sum live only in the
// loop, at its row; both become row buffers on the stack and no view of the
// scratch buffer is left: kiln.scratch_bytes shrinks to 0.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: %[[SCRATCH:[a-z0-9_]+]]: memref<48xi8>
// CHECK-SAME: kiln.scratch_bytes = 0 : i64
// CHECK-NOT: memref.view %[[SCRATCH]]
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-DAG: %[[B1:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
// CHECK-DAG: %[[B2:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4xi8>
// CHECK-DAG: %[[ROW:.*]] = memref.view %[[B1]][%{{.*}}][] : memref<16xi8> to memref<1x4xf32>
// CHECK-DAG: %[[SUM:.*]] = memref.view %[[B2]][%{{.*}}][] : memref<4xi8> to memref<1x1xf32>
// CHECK: memref.store %{{.*}}, %[[ROW]][%{{.*}}, %{{.*}}] : memref<1x4xf32>
// CHECK: memref.store %{{.*}}, %[[SUM]][%{{.*}}, %{{.*}}] : memref<1x1xf32>
// CHECK: memref.load %[[ROW]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %{{.*}}] : memref<2x4xf32>

// With 64 bytes of row buffers per loop (each is padded to 64), the small
// row (the sum) moves first and the 16-byte row stays in scratch (the
// first 32 bytes, rounded up to 64: kiln.scratch_bytes stays 48).
// SMALL-LABEL: func.func @rows
// SMALL-SAME: %[[SCRATCH:[a-z0-9_]+]]: memref<48xi8>
// SMALL-SAME: kiln.scratch_bytes = 48 : i64
// SMALL: %[[E:.*]] = memref.view %[[SCRATCH]][%{{.*}}][] : memref<48xi8> to memref<2x4xf32>
// SMALL-NOT: memref.view %[[SCRATCH]]
// SMALL: memref.alloca() {alignment = 64 : i64} : memref<4xi8>
// SMALL: memref.store %{{.*}}, %[[E]]
func.func @rows(%x: memref<2x4xf32>, %out: memref<2x4xf32>, %scratch: memref<48xi8>)
    attributes {kiln.scratch_bytes = 48 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %e = memref.view %scratch[%c0][] : memref<48xi8> to memref<2x4xf32>
  %s = memref.view %scratch[%c32][] : memref<48xi8> to memref<2x1xf32>
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      %w = math.exp %v : f32
      memref.store %w, %e[%i, %j] : memref<2x4xf32>
    }
    memref.store %zero, %s[%i, %c0] : memref<2x1xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %w = memref.load %e[%i, %j] : memref<2x4xf32>
      %a = memref.load %s[%i, %c0] : memref<2x1xf32>
      %b = arith.addf %a, %w : f32
      memref.store %b, %s[%i, %c0] : memref<2x1xf32>
    }
    %t = memref.load %s[%i, %c0] : memref<2x1xf32>
    scf.for %j = %c0 to %c4 step %c1 {
      %w = memref.load %e[%i, %j] : memref<2x4xf32>
      %d = arith.divf %w, %t : f32
      memref.store %d, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A temporary written in one loop and read in another, or read at another
// row than the loop's, stays in scratch.
// CHECK-LABEL: func.func @not_row_local
// CHECK-SAME: %[[SCRATCH:[a-z0-9_]+]]: memref<64xi8>
// CHECK-DAG: %[[A:.*]] = memref.view %[[SCRATCH]][%{{.*}}][] : memref<64xi8> to memref<2x4xf32>
// CHECK-DAG: %[[B:.*]] = memref.view %[[SCRATCH]][%{{.*}}][] : memref<64xi8> to memref<2x4xf32>
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: memref.load %[[A]]
func.func @not_row_local(%x: memref<2x4xf32>, %out: memref<2x4xf32>, %scratch: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %a = memref.view %scratch[%c0][] : memref<64xi8> to memref<2x4xf32>
  %b = memref.view %scratch[%c32][] : memref<64xi8> to memref<2x4xf32>
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      memref.store %v, %a[%i, %j] : memref<2x4xf32>
      memref.store %v, %b[%i, %j] : memref<2x4xf32>
    }
    scf.for %j = %c0 to %c4 step %c1 {
      %w = memref.load %b[%c0, %j] : memref<2x4xf32>
      memref.store %w, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %w = memref.load %a[%i, %j] : memref<2x4xf32>
      memref.store %w, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Without a trailing byte buffer there is no scratch: nothing changes.
// CHECK-LABEL: func.func @no_scratch
// CHECK-NOT: memref.alloca
func.func @no_scratch(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x4xf32>
      memref.store %v, %out[%i, %j] : memref<2x4xf32>
    }
    scf.reduce
  }
  return
}
