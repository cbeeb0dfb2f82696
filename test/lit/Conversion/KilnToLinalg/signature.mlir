// RUN: kiln-opt %s -kiln-convert-to-linalg | FileCheck %s

// ui8 becomes i8 everywhere, function signatures, calls and returns included.
// CHECK-LABEL: func.func @callee
// CHECK-SAME: (%{{.*}}: tensor<4xi8>) -> tensor<4xi8>
func.func @callee(%x: tensor<4xui8>) -> tensor<4xui8> {
  %0 = kiln.add %x, %x : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  return %0 : tensor<4xui8>
}

// CHECK-LABEL: func.func @caller
// CHECK-SAME: (%[[X:.*]]: tensor<4xi8>) -> tensor<4xi8>
// CHECK: %[[R:.*]] = call @callee(%[[X]]) : (tensor<4xi8>) -> tensor<4xi8>
// CHECK: return %[[R]] : tensor<4xi8>
func.func @caller(%x: tensor<4xui8>) -> tensor<4xui8> {
  %0 = call @callee(%x) : (tensor<4xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}
