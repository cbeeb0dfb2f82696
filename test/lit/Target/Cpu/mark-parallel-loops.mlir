// RUN: kiln-opt %s -kiln-cpu-mark-parallel-loops -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-mark-parallel-loops=f32-lanes=16 -split-input-file | FileCheck %s --check-prefix=LANES

// An optimizer's in-place update: the output argument may be the donated
// input's buffer, read and written at the same element; a temporary in the
// scratch buffer (a view) is another buffer. The inner loop is parallel, the
// outer loop (not innermost) is left alone.
// CHECK: #[[G:.*]] = #llvm.access_group<id = distinct[0]<>>
// CHECK: #[[L:.*]] = #llvm.loop_annotation<parallelAccesses = #[[G]]>
// CHECK-LABEL: func.func @in_place_update
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK: } {llvm.loop_annotation = #[[L]]}
// CHECK-NEXT: }
// CHECK-NOT: llvm.loop_annotation
func.func @in_place_update(%p: memref<2x4xf32>, %g: memref<2x4xf32>, %out: memref<2x4xf32>, %scratch: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %lr = arith.constant 0.1 : f32
  %t = memref.view %scratch[%c0][] : memref<64xi8> to memref<2x4xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %a = memref.load %p[%i, %j] : memref<2x4xf32>
      %b = memref.load %g[%i, %j] : memref<2x4xf32>
      %s = arith.mulf %b, %lr : f32
      memref.store %s, %t[%i, %j] : memref<2x4xf32>
      %u = memref.load %t[%i, %j] : memref<2x4xf32>
      %d = arith.subf %a, %u : f32
      memref.store %d, %out[%i, %j] : memref<2x4xf32>
    }
  }
  return
}

// -----

// A store to the same element in every iteration (an accumulator in
// memory) and a read of the neighbouring element of the written buffer
// (a prefix sum) carry values between iterations: not parallel. Neither is
// a read of another argument of another shape (it may be the same buffer),
// nor a loop that only reads.
// CHECK-LABEL: func.func @dependent
// CHECK-NOT: llvm.loop_annotation
// CHECK: return
func.func @dependent(%x: memref<8xf32>, %acc: memref<f32>, %y: memref<8xf32>, %z: memref<2x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %j = %c0 to %c8 step %c1 {
    %a = memref.load %acc[] : memref<f32>
    %v = memref.load %x[%j] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %acc[] : memref<f32>
  }
  scf.for %j = %c0 to %c7 step %c1 {
    %v = memref.load %y[%j] : memref<8xf32>
    %n = arith.addi %j, %c1 : index
    %w = memref.load %y[%n] : memref<8xf32>
    %s = arith.addf %v, %w : f32
    memref.store %s, %y[%n] : memref<8xf32>
  }
  scf.for %j = %c0 to %c8 step %c1 {
    %r = arith.divui %j, %c8 : index
    %v = memref.load %z[%r, %c0] : memref<2x4xf32>
    memref.store %v, %x[%j] : memref<8xf32>
  }
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> (f32) {
    %v = memref.load %x[%j] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    scf.yield %s : f32
  }
  return %sum : f32
}

// -----

// A softmax row's exp loop: f32 work stored per element and summed in f64.
// With f32-lanes it asks LLVM for 16 lanes (which would otherwise size its
// vectors by the f64 sum); without, only the parallel access group.
// CHECK-LABEL: func.func @exp_and_sum
// CHECK: llvm.loop_annotation
// LANES: #[[W:.*]] = #llvm.loop_vectorize<width = 16 : i32>
// LANES: #llvm.loop_annotation<vectorize = #[[W]], parallelAccesses =
// LANES-LABEL: func.func @exp_and_sum
func.func @exp_and_sum(%x: memref<8xf32>, %e: memref<8xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f64
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> (f64) {
    %v = memref.load %x[%j] : memref<8xf32>
    %x2 = math.exp %v : f32
    memref.store %x2, %e[%j] : memref<8xf32>
    %w = arith.extf %x2 : f32 to f64
    %s = arith.addf %a, %w : f64
    scf.yield %s : f64
  }
  return %sum : f64
}
