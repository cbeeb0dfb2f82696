// RUN: kiln-opt %s -kiln-convert-to-linalg -linalg-fuse-elementwise-ops | FileCheck %s

// A recorded elementwise chain (with broadcasting and an f16 step) lowers to
// generics that fuse into one.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[H:.*]]: tensor<4x8xf16>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[B]], %[[H]] : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf16>)
// CHECK: arith.addf
// CHECK: math.exp
// CHECK: arith.truncf
// CHECK: arith.mulf
// CHECK: arith.select
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %h: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %0 = kiln.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = kiln.exp %0 : tensor<4x8xf32>
  %2 = kiln.cast %1 : tensor<4x8xf32> to tensor<4x8xf16>
  %3 = kiln.mul %2, %h : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  %4 = kiln.relu %3 : tensor<4x8xf16>
  return %4 : tensor<4x8xf16>
}
