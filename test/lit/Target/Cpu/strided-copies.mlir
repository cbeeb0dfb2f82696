// RUN: kiln-opt %s -kiln-cpu-strided-copies -split-input-file | FileCheck %s

// A dense block written into a slice of a wider buffer (a concatenation):
// both sides have unit-stride rows, so it becomes a loop of row copies
// (each contiguous: memcpy).
// CHECK-LABEL: func.func @into_slice
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK:   %[[R:.*]] = memref.subview %{{.*}}[%[[I]], 0] [1, 4] [1, 1]
// CHECK:   %[[T:.*]] = memref.subview %{{.*}}[%[[I]], 0] [1, 4] [1, 1]
// CHECK:   memref.copy %[[R]], %[[T]] : memref<1x4xf32, strided<[4, 1], offset: ?>> to memref<1x4xf32, strided<[8, 1], offset: ?>>
// CHECK-NOT: linalg.copy
func.func @into_slice(%a: memref<2x4xf32>, %out: memref<2x8xf32>) {
  %s = memref.subview %out[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %a, %s : memref<2x4xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  return
}

// -----

// Rank 3 (every other row of an index tensor): two loops, one row copy.
// CHECK-LABEL: func.func @from_strided
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     memref.copy %{{.*}}, %{{.*}} : memref<1x1x3xi64, strided<[12, 6, 1], offset: ?>> to memref<1x1x3xi64, strided<[6, 3, 1], offset: ?>>
func.func @from_strided(%a: memref<2x4x3xi64>, %out: memref<2x2x3xi64>) {
  %s = memref.subview %a[0, 0, 0] [2, 2, 3] [1, 2, 1] : memref<2x4x3xi64> to memref<2x2x3xi64, strided<[12, 6, 1]>>
  memref.copy %s, %out : memref<2x2x3xi64, strided<[12, 6, 1]>> to memref<2x2x3xi64>
  return
}

// -----

// A transposed source has no unit-stride rows: linalg.copy.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4x2xf32, strided<[1, 4]>>) outs(%{{.*}} : memref<4x2xf32>)
func.func @transposed(%a: memref<4x2xf32, strided<[1, 4]>>, %out: memref<4x2xf32>) {
  memref.copy %a, %out : memref<4x2xf32, strided<[1, 4]>> to memref<4x2xf32>
  return
}

// -----

// Both sides contiguous (an offset alone keeps a row-major block contiguous):
// the copy stays a memref.copy, which lowers to memcpy.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
// CHECK-NOT: linalg.copy
// CHECK-NOT: scf.for
func.func @contiguous(%a: memref<2x4xf32>, %out: memref<4x4xf32>) {
  %s = memref.subview %out[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  memref.copy %a, %s : memref<2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  return
}
