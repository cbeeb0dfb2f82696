// RUN: kiln-opt %s -kiln-gpu-row-kernels -split-input-file | FileCheck %s

// A row's sum, initialised and then divided into the row: the fill, the
// reduction and the division over the same 16 rows become one launch of a
// block per row, a barrier between the nests: the fill on thread 0, the
// sum's tree of halvings in workgroup memory, the division strided over
// the block's 128 threads.
// CHECK-LABEL: func.func @normalise_rows
// CHECK: gpu.launch blocks
// CHECK-SAME: workgroup(%{{.*}} : memref<128xf32, #gpu.address_space<workgroup>>)
// CHECK: arith.cmpi eq
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<16xf32>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: memref.load %{{.*}} : memref<16x128xf32>
// The tree of halvings: a barrier after the partial sums' stores and after
// each of 7 halvings; thread 0 adds the row's sum; a barrier before the
// division, which reads it.
// CHECK-COUNT-8: gpu.barrier
// CHECK: arith.addf
// CHECK: memref.store %{{.*}} : memref<16xf32>
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK: arith.divf
// CHECK-NOT: gpu.launch
// CHECK-NOT: scf.parallel
func.func @normalise_rows(%x: memref<16x128xf32>, %sum: memref<16xf32>, %y: memref<16x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    memref.store %zero, %sum[%i] : memref<16xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    scf.for %k = %c0 to %c128 step %c1 {
      %v = memref.load %x[%i, %k] : memref<16x128xf32>
      %a = memref.load %sum[%i] : memref<16xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %sum[%i] : memref<16xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c128) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<16x128xf32>
    %s = memref.load %sum[%i] : memref<16xf32>
    %q = arith.divf %v, %s : f32
    memref.store %q, %y[%i, %j] : memref<16x128xf32>
    scf.reduce
  }
  return
}

// -----

// The division reads the sums across rows (sum[j]): running the nests row
// by row would read sums not computed yet, so the division stays a nest of
// its own.
// CHECK-LABEL: func.func @reads_across_rows
// CHECK: gpu.launch
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) =
// CHECK: arith.divf
func.func @reads_across_rows(%x: memref<32x32xf32>, %sum: memref<32xf32>, %y: memref<32x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c32) step (%c1) {
    memref.store %zero, %sum[%i] : memref<32xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c32) step (%c1) {
    scf.for %k = %c0 to %c32 step %c1 {
      %v = memref.load %x[%i, %k] : memref<32x32xf32>
      %a = memref.load %sum[%i] : memref<32xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %sum[%i] : memref<32xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c32, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<32x32xf32>
    %s = memref.load %sum[%j] : memref<32xf32>
    %q = arith.divf %v, %s : f32
    memref.store %q, %y[%i, %j] : memref<32x32xf32>
    scf.reduce
  }
  return
}
