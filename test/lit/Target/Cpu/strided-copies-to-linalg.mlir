// RUN: kiln-opt %s -kiln-cpu-strided-copies-to-linalg -split-input-file | FileCheck %s

// A dense block written into a slice of a wider buffer (a concatenation):
// the strided target makes it a linalg.copy.
// CHECK-LABEL: func.func @into_slice
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<2x4xf32>) outs(%{{.*}} : memref<2x4xf32, strided<[8, 1], offset: 4>>)
func.func @into_slice(%a: memref<2x4xf32>, %out: memref<2x8xf32>) {
  %s = memref.subview %out[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %a, %s : memref<2x4xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  return
}

// -----

// A strided source (every other row of an index tensor) into a dense buffer.
// CHECK-LABEL: func.func @from_strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<2x3xi64, strided<[6, 1]>>) outs(%{{.*}} : memref<2x3xi64>)
func.func @from_strided(%a: memref<4x3xi64>, %out: memref<2x3xi64>) {
  %s = memref.subview %a[0, 0] [2, 3] [2, 1] : memref<4x3xi64> to memref<2x3xi64, strided<[6, 1]>>
  memref.copy %s, %out : memref<2x3xi64, strided<[6, 1]>> to memref<2x3xi64>
  return
}

// -----

// Both sides contiguous (an offset alone keeps a row-major block contiguous):
// the copy stays a memref.copy, which lowers to memcpy.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<2x4xf32>, %out: memref<4x4xf32>) {
  %s = memref.subview %out[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  memref.copy %a, %s : memref<2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  return
}
