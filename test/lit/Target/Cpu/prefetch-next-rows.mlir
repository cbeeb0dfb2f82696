// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-prefetch-next-rows))' -split-input-file | FileCheck %s

// Softmax's row loop: a max pass, then an exp-and-sum pass (the heavier of
// the later ones) and a scale pass. The exp pass's load of the input gets
// a prefetch of the next row (clamped to the last one); its load of the
// output, which the kernel writes, does not; nor does the first pass.
// CHECK-LABEL: func.func @softmax_rows
// CHECK: scf.parallel (%[[R:[a-z0-9_]+]]) =
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[LAST:.*]] = arith.constant 63 : index
// CHECK-NEXT: %[[SUM:.*]] = arith.addi %[[R]], %[[ONE]] : index
// CHECK-NEXT: %[[NEXT:.*]] = arith.minui %[[SUM]], %[[LAST]] : index
// CHECK: scf.for %[[J0:[a-z0-9_]+]] =
// CHECK-NOT: memref.prefetch
// CHECK: memref.load %arg0[%[[R]], %[[J0]]]
// CHECK: scf.for %[[J1:[a-z0-9_]+]] =
// CHECK-NEXT: memref.prefetch %arg0[%[[NEXT]], %[[J1]]], read, locality<3>, data : memref<64x1024xf32>
// CHECK-NEXT: memref.load %arg0[%[[R]], %[[J1]]]
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @softmax_rows(%x: memref<64x1024xf32>, %out: memref<64x1024xf32>, %lo: index, %hi: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.parallel (%r) = (%lo) to (%hi) step (%c1) {
    %max = scf.for %j = %c0 to %c1024 step %c1 iter_args(%m = %ninf) -> (f32) {
      %v = memref.load %x[%r, %j] : memref<64x1024xf32>
      %n = arith.maximumf %m, %v : f32
      scf.yield %n : f32
    }
    %sum = scf.for %j = %c0 to %c1024 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %x[%r, %j] : memref<64x1024xf32>
      %d = arith.subf %v, %max : f32
      %e = math.exp %d : f32
      memref.store %e, %out[%r, %j] : memref<64x1024xf32>
      %b = memref.load %out[%r, %j] : memref<64x1024xf32>
      %t = arith.addf %s, %b : f32
      scf.yield %t : f32
    }
    %inv = arith.divf %one, %sum : f32
    scf.for %j = %c0 to %c1024 step %c1 {
      %v = memref.load %out[%r, %j] : memref<64x1024xf32>
      %w = arith.mulf %v, %inv : f32
      memref.store %w, %out[%r, %j] : memref<64x1024xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Rows of 256 bytes (below min-row-bytes: several rows share a page, and
// the hardware prefetcher follows them) and a loop with one pass over each
// row: nothing to prefetch.
// CHECK-LABEL: func.func @short_rows
// CHECK-NOT: memref.prefetch
// CHECK-LABEL: func.func @one_pass
// CHECK-NOT: memref.prefetch
func.func @short_rows(%x: memref<64x64xf32>, %out: memref<64x64xf32>, %lo: index, %hi: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%r) = (%lo) to (%hi) step (%c1) {
    %sum = scf.for %j = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %x[%r, %j] : memref<64x64xf32>
      %t = arith.addf %s, %v : f32
      scf.yield %t : f32
    }
    scf.for %j = %c0 to %c64 step %c1 {
      %v = memref.load %x[%r, %j] : memref<64x64xf32>
      %w = arith.subf %v, %sum : f32
      memref.store %w, %out[%r, %j] : memref<64x64xf32>
    }
    scf.reduce
  }
  return
}
func.func @one_pass(%x: memref<64x1024xf32>, %out: memref<64x1024xf32>, %lo: index, %hi: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  scf.parallel (%r) = (%lo) to (%hi) step (%c1) {
    scf.for %j = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%r, %j] : memref<64x1024xf32>
      memref.store %v, %out[%r, %j] : memref<64x1024xf32>
    }
    scf.reduce
  }
  return
}
