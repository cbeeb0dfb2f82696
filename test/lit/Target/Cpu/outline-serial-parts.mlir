// RUN: kiln-opt %s -split-input-file -verify-diagnostics \
// RUN:   -kiln-cpu-outline-serial-parts="part-ops=5" | FileCheck %s

// Three loops of 5-6 operations: the first is a part of its own; the second
// defines %sum and %t, which the third reads, so the run goes on to the end.
// Constants are cloned into each part; the stack buffer, which both read,
// stays in the kernel and travels as an extra argument. Each part takes
// only the kernel arguments it reads (kiln.kernel_args: which they are).
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[X:.*]]: memref<8xf32>, %[[Y:.*]]: memref<8xf32>, %[[S:.*]]: memref<f32>)
// CHECK-SAME: kiln.serial_parts = [@kernel_part0, @kernel_part1]
// CHECK-NEXT: %[[BUF:.*]] = memref.alloca() : memref<8xf32>
// CHECK-NEXT: call @kernel_part0(%[[X]], %[[BUF]])
// CHECK-NEXT: call @kernel_part1(%[[Y]], %[[S]], %[[BUF]])
// CHECK-NEXT: return
// CHECK: func.func private @kernel_part0(%[[X0:.*]]: memref<8xf32>, %[[B0:.*]]: memref<8xf32>)
// CHECK-SAME: kiln.kernel_args = array<i64: 0>
// CHECK: arith.constant 2.0
// CHECK: scf.for
// CHECK: memref.load %[[X0]]
// CHECK: memref.store %{{.*}}, %[[B0]]
// CHECK-NOT: scf.for
// CHECK: return
// CHECK: func.func private @kernel_part1(%[[Y1:.*]]: memref<8xf32>, %[[S1:.*]]: memref<f32>, %[[B1:.*]]: memref<8xf32>)
// CHECK-SAME: kiln.kernel_args = array<i64: 1, 2>
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK: %[[T:.*]] = arith.mulf %[[SUM]]
// CHECK: memref.store %[[T]], %[[S1]][]
// CHECK: scf.for
// CHECK: memref.load %[[B1]]
// CHECK: arith.addf %{{.*}}, %[[T]]
// CHECK: memref.store %{{.*}}, %[[Y1]]
func.func @kernel(%x: memref<8xf32>, %y: memref<8xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f32
  %buf = memref.alloca() : memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %w = arith.mulf %v, %two : f32
    memref.store %w, %buf[%i] : memref<8xf32>
  }
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %two) -> (f32) {
    %v = memref.load %buf[%i] : memref<8xf32>
    %a = arith.addf %acc, %v : f32
    scf.yield %a : f32
  }
  %t = arith.mulf %sum, %two : f32
  memref.store %t, %s[] : memref<f32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %buf[%i] : memref<8xf32>
    %w = arith.addf %v, %t : f32
    memref.store %w, %y[%i] : memref<8xf32>
  }
  return
}

// -----

// Under twice part-ops operations: the kernel stays whole.
// CHECK-LABEL: func.func @small
// CHECK-SAME: kiln.serial_parts = []
// CHECK: scf.for
// CHECK-NOT: call
// CHECK-NOT: func.func private @small_part
func.func @small(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %x[%i] : memref<8xf32>
  }
  return
}
