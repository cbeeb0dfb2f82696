// RUN: kiln-opt %s -kiln-cpu-assign-scratch -split-input-file -verify-diagnostics | FileCheck %s

// Two temporaries: views at 64-byte aligned offsets of a new trailing
// scratch argument; no alloc or dealloc is left.
// CHECK-LABEL: func.func @two_temporaries
// CHECK-SAME: (%{{.*}}: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>, %[[S:.*]]: memref<128xi8>)
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG: memref.view %[[S]][%[[C0]]][] : memref<128xi8> to memref<4xf32>
// CHECK-DAG: memref.view %[[S]][%[[C64]]][] : memref<128xi8> to memref<2xf64>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func @two_temporaries(%x: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  %u = memref.alloc() : memref<2xf64>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %t : memref<4xf32>
  return
}

// -----

// Nothing allocated: no scratch argument.
// CHECK-LABEL: func.func @no_temporaries
// CHECK-SAME: (%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>)
// CHECK-SAME: kiln.scratch_bytes = 0 : i64
func.func @no_temporaries(%x: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %x, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

func.func @dynamic(%n: index) {
  // expected-error @+1 {{kiln: only static temporaries can live in scratch memory}}
  %t = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

func.func @in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{kiln: a temporary allocated inside a loop cannot share scratch memory}}
    %t = memref.alloc() : memref<4xf32>
  }
  return
}
