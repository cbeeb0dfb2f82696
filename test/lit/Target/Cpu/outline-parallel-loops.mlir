// RUN: kiln-opt %s -split-input-file -verify-diagnostics \
// RUN:   -kiln-cpu-outline-parallel-loops | FileCheck %s

// A loop over 256 rows of 256 elements (enough work for the pool): its body
// moves to @kernel_par0(begin, end, args...), which runs its rows from begin
// to end, 64 rows a task; the kernel calls the dispatch declaration instead.
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[X:.*]]: memref<256x256xf32>, %[[OUT:.*]]: memref<256x256xf32>)
// CHECK-SAME: kiln.dispatches = {__kiln_parallel_0 = @kernel_par0}, kiln.loop_nests = 1 : i64
// CHECK-NOT: scf.parallel
// CHECK: call @__kiln_parallel_0(%{{.*}}, %[[X]], %[[OUT]])
// CHECK-NEXT: return
// CHECK: func.func private @kernel_par0(%[[BEGIN:.*]]: index, %[[END:.*]]: index, %{{.*}}: memref<256x256xf32>, %{{.*}}: memref<256x256xf32>)
// CHECK-SAME: kiln.grain = 64 : i64
// CHECK: scf.parallel (%{{.*}}) = (%[[BEGIN]]) to (%[[END]])
// CHECK: math.exp
// CHECK: func.func private @__kiln_parallel_0(index, memref<256x256xf32>, memref<256x256xf32>)
func.func @kernel(%x: memref<256x256xf32>, %out: memref<256x256xf32>) {
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
