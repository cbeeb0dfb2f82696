// RUN: kiln-opt %s -kiln-cpu-assign-scratch=dynamic-sizes=true | FileCheck %s

// A dynamic-shape kernel (size %n): the static temporary takes the first 64
// bytes; the dynamic one follows, and kiln.dynamic_scratch tells the
// runtime its size: 4 bytes times the product of 1 size, size 0.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: %[[N:.*]]: index, %[[S:.*]]: memref<64xi8>
// CHECK-SAME: kiln.dynamic_scratch = array<i64: 4, 1, 0>
// CHECK-SAME: kiln.scratch_bytes = 64 : i64
// CHECK-NOT: memref.alloc
func.func @dynamic(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) {
  %s = memref.alloc() : memref<4xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  memref.copy %x, %t : memref<?xf32> to memref<?xf32>
  memref.copy %t, %out : memref<?xf32> to memref<?xf32>
  memref.dealloc %s : memref<4xf32>
  return
}
