// RUN: kiln-opt %s -kiln-cpu-ieee-min-max | FileCheck %s

// IEEE maximum/minimum become the LLVM intrinsics of the same meaning, on
// scalars and vectors; other ops stay.
// CHECK-LABEL: func.func @minmax
// CHECK-SAME: (%[[A:.*]]: f32, %[[B:.*]]: f32, %[[V:.*]]: vector<16xf32>, %[[W:.*]]: vector<16xf32>, %[[D:.*]]: f64)
// CHECK: %[[M:.*]] = llvm.intr.maximum(%[[A]], %[[B]]) : (f32, f32) -> f32
// CHECK: %[[N:.*]] = llvm.intr.minimum(%[[V]], %[[W]]) : (vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// CHECK: %[[X:.*]] = arith.maxnumf %[[D]], %[[D]] : f64
// CHECK: return %[[M]], %[[N]], %[[X]]
func.func @minmax(%a: f32, %b: f32, %v: vector<16xf32>, %w: vector<16xf32>, %d: f64) -> (f32, vector<16xf32>, f64) {
  %m = arith.maximumf %a, %b : f32
  %n = arith.minimumf %v, %w : vector<16xf32>
  %x = arith.maxnumf %d, %d : f64
  return %m, %n, %x : f32, vector<16xf32>, f64
}
