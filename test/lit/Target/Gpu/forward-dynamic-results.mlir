// RUN: kiln-opt %s -kiln-gpu-forward-dynamic-results=num-inputs=1\ num-outputs=2 | FileCheck %s

// A dynamic-shape result computed into an allocation and copied into its
// out-param: the computation writes the out-param, the copy goes. A copy
// followed by another use of its allocation stays.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: memref<?xf32>, %[[OUT:[^:]*]]: memref<?xf32>, %[[KEEP:[^:]*]]: memref<?xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT: memref.copy
// CHECK: %[[T:.*]] = memref.alloc
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK: memref.copy %[[T]], %[[KEEP]]
// CHECK: memref.load %[[T]]
func.func @forward(%x: memref<?xf32>, %out: memref<?xf32>, %keep: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?xf32>
  %v = memref.load %x[%c0] : memref<?xf32>
  memref.store %v, %a[%c0] : memref<?xf32>
  memref.copy %a, %out : memref<?xf32> to memref<?xf32>
  %t = memref.alloc(%n) : memref<?xf32>
  memref.store %v, %t[%c0] : memref<?xf32>
  memref.copy %t, %keep : memref<?xf32> to memref<?xf32>
  %w = memref.load %t[%c0] : memref<?xf32>
  memref.store %w, %x[%c0] : memref<?xf32>
  return
}
