// RUN: kiln-opt %s -kiln-gpu-hoist-parallel-loops | FileCheck %s

// Column sums (a reduction over the leading axis): the serial loop over
// the rows moves inside the parallel loop over the columns, one thread per
// column.
// CHECK-LABEL: func.func @column_sums
// CHECK: scf.parallel (%[[J:.*]]) =
// CHECK-NEXT: scf.for %[[K:.*]] =
// CHECK: memref.load %{{.*}}[%[[K]], %[[J]]] : memref<300x64xf32>
// CHECK-NOT: scf.parallel
func.func @column_sums(%x: memref<300x64xf32>, %acc: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c300 = arith.constant 300 : index
  scf.for %k = %c0 to %c300 step %c1 {
    scf.parallel (%j) = (%c0) to (%c64) step (%c1) {
      %v = memref.load %x[%k, %j] : memref<300x64xf32>
      %a = memref.load %acc[%j] : memref<64xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%j] : memref<64xf32>
      scf.reduce
    }
  }
  return
}
