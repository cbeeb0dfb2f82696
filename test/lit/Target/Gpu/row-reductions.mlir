// RUN: kiln-opt %s -kiln-gpu-row-reductions -split-input-file | FileCheck %s

// Sums of 64 rows of 300: one block of 256 threads per row. Each thread
// sums every 256th element from -0 (the sum's identity), the block halves
// its partial sums in workgroup memory (8 halvings, a barrier after the
// stores and after each), thread 0 adds the row's sum to the accumulator.
// CHECK-LABEL: func.func @row_sums
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[THREADS:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ROWS]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[THREADS]],
// CHECK-SAME: workgroup(%[[SHARED:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[PARTIAL:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[P:.*]] = %[[ZERO]]) -> (f32)
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[K]]] : memref<64x300xf32>
// CHECK: memref.store %[[PARTIAL]], %[[SHARED]][%[[T]]]
// CHECK-COUNT-8: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: %[[IS0:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK: scf.if %[[IS0]]
// CHECK: %[[ACC:.*]] = memref.load %{{.*}}[%[[ROW]]] : memref<64xf32>
// CHECK: %[[SUM:.*]] = memref.load %[[SHARED]][%{{.*}}]
// CHECK: %[[NEW:.*]] = arith.addf %[[ACC]], %[[SUM]] : f32
// CHECK: memref.store %[[NEW]], %{{.*}}[%[[ROW]]] : memref<64xf32>
// CHECK-NOT: scf.parallel
func.func @row_sums(%x: memref<64x300xf32>, %acc: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c300 = arith.constant 300 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %k = %c0 to %c300 step %c1 {
      %v = memref.load %x[%i, %k] : memref<64x300xf32>
      %a = memref.load %acc[%i] : memref<64xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%i] : memref<64xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A dynamic-shape kernel's rows (%n): as many blocks as rows; a row of 40
// gets a block of 64 threads (the power of two at or above it), max from
// -inf.
// CHECK-LABEL: func.func @dynamic_row_max
// CHECK-SAME: %[[N:[^:]*]]: index
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: gpu.launch blocks(
// CHECK-SAME: in (%{{[a-z0-9_]+}} = %[[N]],
// CHECK-SAME: threads(
// CHECK-SAME: in (%{{[a-z0-9_]+}} = %[[C64]],
// CHECK-SAME: workgroup(%{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>)
// CHECK: arith.constant 0xFF800000 : f32
// CHECK-COUNT-6: arith.maximumf
func.func @dynamic_row_max(%x: memref<?x40xf32>, %acc: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c40 = arith.constant 40 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %k = %c0 to %c40 step %c1 {
      %v = memref.load %x[%i, %k] : memref<?x40xf32>
      %a = memref.load %acc[%i] : memref<?xf32>
      %m = arith.maximumf %a, %v : f32
      memref.store %m, %acc[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Rows of 20 keep a thread each (a block per row pays from 32), and a
// reduction whose other load reads the accumulator's buffer keeps its loop.
// CHECK-LABEL: func.func @short_rows
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
// CHECK-LABEL: func.func @reads_its_accumulator
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
func.func @short_rows(%x: memref<64x20xf32>, %acc: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c20 = arith.constant 20 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %k = %c0 to %c20 step %c1 {
      %v = memref.load %x[%i, %k] : memref<64x20xf32>
      %a = memref.load %acc[%i] : memref<64xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%i] : memref<64xf32>
    }
    scf.reduce
  }
  return
}
func.func @reads_its_accumulator(%acc: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %k = %c0 to %c64 step %c1 {
      %v = memref.load %acc[%i, %k] : memref<64x64xf32>
      %a = memref.load %acc[%i, %c0] : memref<64x64xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%i, %c0] : memref<64x64xf32>
    }
    scf.reduce
  }
  return
}
