// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-fold-matmul-transposes))' -split-input-file | FileCheck %s

// dX = dY * W^T and dW = X^T * dY: both copies become views and the
// emptied temporaries go.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[W:.*]]: memref<8x4xf32>, %[[X:.*]]: memref<2x8xf32>, %[[DY:.*]]: memref<2x4xf32>
// CHECK-NOT: linalg.transpose
// CHECK-NOT: memref.alloc
// CHECK: %[[WT:.*]] = memref.transpose %[[W]] (d0, d1) -> (d1, d0) : memref<8x4xf32> to memref<4x8xf32, strided<[1, 4]>>
// CHECK: linalg.matmul ins(%[[DY]], %[[WT]] : memref<2x4xf32>, memref<4x8xf32, strided<[1, 4]>>)
// CHECK: %[[XT:.*]] = memref.transpose %[[X]] (d0, d1) -> (d1, d0) : memref<2x8xf32> to memref<8x2xf32, strided<[1, 8]>>
// CHECK: linalg.matmul ins(%[[XT]], %[[DY]] : memref<8x2xf32, strided<[1, 8]>>, memref<2x4xf32>)
func.func @backward(%w: memref<8x4xf32>, %x: memref<2x8xf32>, %dy: memref<2x4xf32>, %dx: memref<2x8xf32>, %dw: memref<8x4xf32>) {
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.transpose ins(%w : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xf32>, memref<4x8xf32>) outs(%dx : memref<2x8xf32>)
  %u = memref.alloc() {alignment = 64 : i64} : memref<8x2xf32>
  linalg.transpose ins(%x : memref<2x8xf32>) outs(%u : memref<8x2xf32>) permutation = [1, 0]
  linalg.matmul ins(%u, %dy : memref<8x2xf32>, memref<2x4xf32>) outs(%dw : memref<8x4xf32>)
  return
}

// -----

// One temporary serves two copies (as bufferization reuses buffers): the
// second copy overwrites what the first wrote after the first matmul read
// it, so both fold.
// CHECK-LABEL: func.func @reused
// CHECK-NOT: linalg.transpose
// CHECK-NOT: memref.alloc
// CHECK: memref.transpose %arg0
// CHECK: linalg.matmul
// CHECK: memref.transpose %arg1
// CHECK: linalg.matmul
func.func @reused(%w1: memref<8x4xf32>, %w2: memref<8x4xf32>, %dy: memref<2x4xf32>, %a: memref<2x8xf32>, %b: memref<2x8xf32>) {
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.transpose ins(%w1 : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xf32>, memref<4x8xf32>) outs(%a : memref<2x8xf32>)
  linalg.transpose ins(%w2 : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xf32>, memref<4x8xf32>) outs(%b : memref<2x8xf32>)
  return
}

// -----

// Kept: the copy is read again after the matmul, or the source changes
// between the copy and the matmul.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: linalg.transpose
// CHECK-NOT: memref.transpose
func.func @kept(%w: memref<8x4xf32>, %dy: memref<2x4xf32>, %dx: memref<2x8xf32>, %keep: memref<4x8xf32>, %v: memref<8x4xf32>, %dx2: memref<2x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.transpose ins(%w : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xf32>, memref<4x8xf32>) outs(%dx : memref<2x8xf32>)
  linalg.copy ins(%t : memref<4x8xf32>) outs(%keep : memref<4x8xf32>)
  %u = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.transpose ins(%v : memref<8x4xf32>) outs(%u : memref<4x8xf32>) permutation = [1, 0]
  linalg.fill ins(%zero : f32) outs(%v : memref<8x4xf32>)
  linalg.matmul ins(%dy, %u : memref<2x4xf32>, memref<4x8xf32>) outs(%dx2 : memref<2x8xf32>)
  return
}

// -----

// The backward of x * W^T as bufferization lays it out: W^T is copied into
// the out-param that later receives dW (zero-filled, then the product), so
// the copy folds; in an out-param nothing overwrites afterwards, the caller
// would read the copy, so that one stays.
// CHECK-LABEL: func.func @out_param
// CHECK-SAME: (%[[W:.*]]: memref<4x4xf32>, %[[DY:.*]]: memref<2x4xf32>, %[[X:.*]]: memref<2x4xf32>, %[[DX:.*]]: memref<2x4xf32>, %[[DW:.*]]: memref<4x4xf32>, %[[T:.*]]: memref<4x4xf32>, %[[DX2:.*]]: memref<2x4xf32>)
// CHECK: %[[WT:.*]] = memref.transpose %[[W]] (d0, d1) -> (d1, d0)
// CHECK: linalg.matmul ins(%[[DY]], %[[WT]] : memref<2x4xf32>, memref<4x4xf32, strided<[1, 4]>>) outs(%[[DX]] :
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DW]] :
// CHECK: linalg.transpose ins(%[[W]] : memref<4x4xf32>) outs(%[[T]] : memref<4x4xf32>)
// CHECK: linalg.matmul ins(%[[DY]], %[[T]] : memref<2x4xf32>, memref<4x4xf32>) outs(%[[DX2]] :
func.func @out_param(%w: memref<4x4xf32>, %dy: memref<2x4xf32>, %x: memref<2x4xf32>, %dx: memref<2x4xf32>, %dw: memref<4x4xf32>, %t: memref<4x4xf32>, %dx2: memref<2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.transpose ins(%w : memref<4x4xf32>) outs(%dw : memref<4x4xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %dw : memref<2x4xf32>, memref<4x4xf32>) outs(%dx : memref<2x4xf32>)
  linalg.fill ins(%zero : f32) outs(%dw : memref<4x4xf32>)
  %xt = memref.transpose %x (d0, d1) -> (d1, d0) : memref<2x4xf32> to memref<4x2xf32, strided<[1, 4]>>
  linalg.matmul ins(%xt, %dy : memref<4x2xf32, strided<[1, 4]>>, memref<2x4xf32>) outs(%dw : memref<4x4xf32>)
  linalg.transpose ins(%w : memref<4x4xf32>) outs(%t : memref<4x4xf32>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xf32>, memref<4x4xf32>) outs(%dx2 : memref<2x4xf32>)
  return
}

// -----

// Attention's q * k^T: a batched transpose of the last two dimensions.
// CHECK-LABEL: func.func @scores
// CHECK-SAME: (%[[Q:.*]]: memref<3x5x4xf32>, %[[K:.*]]: memref<3x5x4xf32>
// CHECK-NOT: linalg.transpose
// CHECK: %[[KT:.*]] = memref.transpose %[[K]] (d0, d1, d2) -> (d0, d2, d1)
// CHECK: linalg.batch_matmul ins(%[[Q]], %[[KT]] :
func.func @scores(%q: memref<3x5x4xf32>, %k: memref<3x5x4xf32>, %s: memref<3x5x5xf32>) {
  %t = memref.alloc() {alignment = 64 : i64} : memref<3x4x5xf32>
  linalg.transpose ins(%k : memref<3x5x4xf32>) outs(%t : memref<3x4x5xf32>) permutation = [0, 2, 1]
  linalg.batch_matmul ins(%q, %t : memref<3x5x4xf32>, memref<3x4x5xf32>) outs(%s : memref<3x5x5xf32>)
  return
}

// -----

// bf16 operands into f32 (the runtime's bf16 GEMM takes strided views too).
// CHECK-LABEL: func.func @bf16_backward
// CHECK-NOT: linalg.transpose
// CHECK: %[[WT:.*]] = memref.transpose %{{.*}} (d0, d1) -> (d1, d0) : memref<8x4xbf16> to memref<4x8xbf16, strided<[1, 4]>>
// CHECK: linalg.matmul ins(%{{.*}}, %[[WT]] : memref<2x4xbf16>, memref<4x8xbf16, strided<[1, 4]>>) outs(%{{.*}} : memref<2x8xf32>)
func.func @bf16_backward(%w: memref<8x4xbf16>, %dy: memref<2x4xbf16>, %dx: memref<2x8xf32>) {
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
  linalg.transpose ins(%w : memref<8x4xbf16>) outs(%t : memref<4x8xbf16>) permutation = [1, 0]
  linalg.matmul ins(%dy, %t : memref<2x4xbf16>, memref<4x8xbf16>) outs(%dx : memref<2x8xf32>)
  return
}
