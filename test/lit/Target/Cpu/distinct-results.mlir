// RUN: kiln-opt %s -kiln-cpu-distinct-results -split-input-file | FileCheck %s

// One value returned twice: the second result becomes a copy of its own.
// CHECK-LABEL: func.func @twice
// CHECK: %[[E:.*]] = math.exp
// CHECK: %[[C:.*]] = linalg.copy ins(%[[E]] : tensor<4xf32>)
// CHECK: return %[[E]], %[[C]]
func.func @twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = math.exp %x : tensor<4xf32>
  return %e, %e : tensor<4xf32>, tensor<4xf32>
}

// -----

// A returned argument is copied: the output buffer is not the input's.
// CHECK-LABEL: func.func @argument
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[C:.*]] = linalg.copy ins(%[[X]] : tensor<4xf32>)
// CHECK: return %[[C]]
func.func @argument(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Two results computed apart stay as they are.
// CHECK-LABEL: func.func @distinct
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @distinct(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = math.exp %x : tensor<4xf32>
  %l = math.log %x : tensor<4xf32>
  return %e, %l : tensor<4xf32>, tensor<4xf32>
}
