// RUN: kiln-opt %s -split-input-file -verify-diagnostics \
// RUN:   -kiln-cpu-outline-parallel-loops | FileCheck %s

// A loop over 256 rows of 256 elements (enough work for the pool): its body
// moves to @kernel_par0(begin, end, args it reads...), which runs its rows
// from begin to end, 64 rows a task; the kernel calls the dispatch
// declaration instead. The body does not read %unused: neither it nor the
// call takes it, and kiln.kernel_args says which kernel arguments it took.
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[X:.*]]: memref<256x256xf32>, %{{.*}}: memref<4xf32>, %[[OUT:.*]]: memref<256x256xf32>)
// CHECK-SAME: kiln.dispatches = {__kiln_parallel_0 = @kernel_par0}, kiln.loop_nests = 1 : i64
// CHECK-NOT: scf.parallel
// CHECK: call @__kiln_parallel_0(%{{.*}}, %[[X]], %[[OUT]]) : (index, memref<256x256xf32>, memref<256x256xf32>) -> ()
// CHECK-NEXT: return
// CHECK: func.func private @kernel_par0(%[[BEGIN:.*]]: index, %[[END:.*]]: index, %{{.*}}: memref<256x256xf32>, %{{.*}}: memref<256x256xf32>)
// CHECK-SAME: kiln.grain = 64 : i64, kiln.kernel_args = array<i64: 0, 2>
// CHECK: scf.parallel (%{{.*}}) = (%[[BEGIN]]) to (%[[END]])
// CHECK: math.exp
// CHECK: func.func private @__kiln_parallel_0(index, memref<256x256xf32>, memref<256x256xf32>)
func.func @kernel(%x: memref<256x256xf32>, %unused: memref<4xf32>, %out: memref<256x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i) = (%c0) to (%c256) step (%c1) {
    scf.for %j = %c0 to %c256 step %c1 {
      %v = memref.load %x[%i, %j] : memref<256x256xf32>
      %e = math.exp %v : f32
      memref.store %e, %out[%i, %j] : memref<256x256xf32>
    }
    scf.reduce
  }
  return
}

// -----

// 4 x 4 elements: a task would cost more than the work; the loop stays.
// CHECK-LABEL: func.func @small
// CHECK-SAME: kiln.dispatches = {}, kiln.loop_nests = 1 : i64
// CHECK: scf.parallel
// CHECK-NOT: __kiln_parallel
// CHECK-NOT: func.func @small_par
func.func @small(%x: memref<4x4xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x4xf32>
      memref.store %v, %out[%i, %j] : memref<4x4xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A row-fused body: eight loops of 2048 one after another, 16K iterations a
// row, 128K in all: enough to dispatch (loops in a row add up; the product
// of their trip counts, 2^88, overflowed to 0 and kept such loops serial).
// CHECK-LABEL: func.func @rows
// CHECK-SAME: kiln.dispatches = {__kiln_parallel_0 = @rows_par0}
// CHECK-NOT: scf.parallel
// CHECK: call @__kiln_parallel_0
// CHECK: func.func private @rows_par0
// CHECK-SAME: kiln.grain = 1 : i64
func.func @rows(%x0: memref<8x2048xf32>, %x1: memref<8x2048xf32>, %x2: memref<8x2048xf32>, %x3: memref<8x2048xf32>, %x4: memref<8x2048xf32>, %x5: memref<8x2048xf32>, %x6: memref<8x2048xf32>, %x7: memref<8x2048xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c2048 = arith.constant 2048 : index
  %z = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j0 = %c0 to %c2048 step %c1 {
      memref.store %z, %x0[%i, %j0] : memref<8x2048xf32>
    }
    scf.for %j1 = %c0 to %c2048 step %c1 {
      memref.store %z, %x1[%i, %j1] : memref<8x2048xf32>
    }
    scf.for %j2 = %c0 to %c2048 step %c1 {
      memref.store %z, %x2[%i, %j2] : memref<8x2048xf32>
    }
    scf.for %j3 = %c0 to %c2048 step %c1 {
      memref.store %z, %x3[%i, %j3] : memref<8x2048xf32>
    }
    scf.for %j4 = %c0 to %c2048 step %c1 {
      memref.store %z, %x4[%i, %j4] : memref<8x2048xf32>
    }
    scf.for %j5 = %c0 to %c2048 step %c1 {
      memref.store %z, %x5[%i, %j5] : memref<8x2048xf32>
    }
    scf.for %j6 = %c0 to %c2048 step %c1 {
      memref.store %z, %x6[%i, %j6] : memref<8x2048xf32>
    }
    scf.for %j7 = %c0 to %c2048 step %c1 {
      memref.store %z, %x7[%i, %j7] : memref<8x2048xf32>
    }
    scf.reduce
  }
  return
}
