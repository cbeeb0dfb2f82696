// RUN: kiln-opt %s -kiln-cpu-promote-accumulators -split-input-file | FileCheck %s

// A row sum accumulating in memory: loaded once before the loop, carried,
// stored once after. The f32 -> f64 sum may be reassociated.
// CHECK-LABEL: func.func @row_sum
// CHECK: %[[INIT:.*]] = memref.load %[[ACC:.*]][%[[I:.*]]] : memref<4xf64>
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f64)
// CHECK-NOT: memref.store
// CHECK: arith.addf %[[A]], %{{.*}} fastmath<reassoc> : f64
// CHECK: scf.yield
// CHECK: memref.store %[[R]], %[[ACC]][%[[I]]] : memref<4xf64>
func.func @row_sum(%x: memref<4x8xf32>, %acc: memref<4xf64>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i, %j] : memref<4x8xf32>
    %w = arith.extf %v : f32 to f64
    %a = memref.load %acc[%i] : memref<4xf64>
    %s = arith.addf %a, %w : f64
    memref.store %s, %acc[%i] : memref<4xf64>
  }
  return
}

// -----

// The loop also stores into the accumulator's buffer elsewhere: it stays
// in memory.
// CHECK-LABEL: func.func @clash
// CHECK-NOT: iter_args
// CHECK: scf.for
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<4xf32>
// CHECK: memref.store
// CHECK: memref.store
func.func @clash(%x: memref<8xf32>, %acc: memref<4xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c3 = arith.constant 3 : index
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %x[%j] : memref<8xf32>
    %a = memref.load %acc[%i] : memref<4xf32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %acc[%i] : memref<4xf32>
    memref.store %v, %acc[%c3] : memref<4xf32>
  }
  return
}
