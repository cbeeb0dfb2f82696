// RUN: kiln-opt %s -kiln-cpu-block-wide-sums=block=4 -split-input-file | FileCheck %s
// RUN: kiln-opt %s "-kiln-cpu-block-wide-sums=block=16 min-block=4" -split-input-file | FileCheck %s --check-prefix=SIZES

// A row sum of exp terms in f64 with a max carried alongside: the loop runs
// over blocks of 4; the inner loop adds the f32 terms from -0 (the identity
// of addition) and passes the max through; each block's sum is widened
// once. 10 iterations: two blocks, then the last two in a copy of the
// original loop.
// CHECK-LABEL: func.func @sum_and_max
// CHECK-DAG: %[[Z32:.*]] = arith.constant -0.000000e+00 : f32
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[OUT:.*]]:2 = scf.for %[[B:[a-z0-9_]+]] = %{{.*}} to %[[C8]] step %[[C4]] iter_args(%[[A:[a-z0-9_]+]] = %{{.*}}, %[[M:[a-z0-9_]+]] = %{{.*}}) -> (f64, f32)
// CHECK: %[[IN:.*]]:2 = scf.for %[[K:[a-z0-9_]+]] = {{.*}} iter_args(%[[Q:[a-z0-9_]+]] = %[[Z32]], %[[M2:[a-z0-9_]+]] = %[[M]]) -> (f32, f32)
// CHECK: %[[J:.*]] = arith.addi %[[B]], %[[K]] : index
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%[[J]]]
// CHECK: %[[E:.*]] = math.exp %[[V]]
// CHECK-NOT: arith.extf
// CHECK: arith.maximumf %[[M2]], %[[V]]
// CHECK: %[[S:.*]] = arith.addf %[[Q]], %[[E]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[S]], %{{.*}} : f32, f32
// CHECK: %[[W:.*]] = arith.extf %[[IN]]#0 : f32 to f64
// CHECK: %[[T:.*]] = arith.addf %[[A]], %[[W]] fastmath<reassoc> : f64
// CHECK: scf.yield %[[T]], %[[IN]]#1 : f64, f32
// CHECK: %[[REST:.*]]:2 = scf.for %{{.*}} = %[[C8]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[OUT]]#0, %{{.*}} = %[[OUT]]#1) -> (f64, f32)
// CHECK: arith.extf
// CHECK: return %[[REST]]#0, %[[REST]]#1
func.func @sum_and_max(%x: memref<10xf32>) -> (f64, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %zero = arith.constant 0.0 : f64
  %ninf = arith.constant 0xFF800000 : f32
  %r:2 = scf.for %j = %c0 to %c10 step %c1 iter_args(%a = %zero, %m = %ninf) -> (f64, f32) {
    %v = memref.load %x[%j] : memref<10xf32>
    %e = math.exp %v : f32
    %w = arith.extf %e : f32 to f64
    %n = arith.maximumf %m, %v : f32
    %s = arith.addf %a, %w fastmath<reassoc> : f64
    scf.yield %s, %n : f64, f32
  }
  return %r#0, %r#1 : f64, f32
}

// -----

// Without reassoc the order of the additions is the program's: unchanged.
// CHECK-LABEL: func.func @ordered_sum
// CHECK: scf.for {{.*}} -> (f64)
// CHECK-NOT: scf.for
// CHECK: arith.extf
// CHECK: arith.addf %{{.*}}, %{{.*}} : f64
func.func @ordered_sum(%x: memref<16xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f64
  %r = scf.for %j = %c0 to %c16 step %c1 iter_args(%a = %zero) -> (f64) {
    %v = memref.load %x[%j] : memref<16xf32>
    %w = arith.extf %v : f32 to f64
    %s = arith.addf %a, %w : f64
    scf.yield %s : f64
  }
  return %r : f64
}

// -----

// Fewer than two blocks of iterations: unchanged.
// CHECK-LABEL: func.func @short_sum
// CHECK: scf.for {{.*}} -> (f64)
// CHECK-NOT: scf.for
func.func @short_sum(%x: memref<7xf32>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %zero = arith.constant 0.0 : f64
  %r = scf.for %j = %c0 to %c7 step %c1 iter_args(%a = %zero) -> (f64) {
    %v = memref.load %x[%j] : memref<7xf32>
    %w = arith.extf %v : f32 to f64
    %s = arith.addf %a, %w fastmath<reassoc> : f64
    scf.yield %s : f64
  }
  return %r : f64
}

// -----

// The f64 sum also feeds another op in the loop (a running value): each
// partial sum is observed, so the loop stays.
// CHECK-LABEL: func.func @observed_sum
// CHECK: scf.for {{.*}} -> (f64)
// CHECK-NOT: scf.for
func.func @observed_sum(%x: memref<16xf32>, %y: memref<16xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f64
  %r = scf.for %j = %c0 to %c16 step %c1 iter_args(%a = %zero) -> (f64) {
    %v = memref.load %x[%j] : memref<16xf32>
    %w = arith.extf %v : f32 to f64
    %s = arith.addf %a, %w fastmath<reassoc> : f64
    memref.store %s, %y[%j] : memref<16xf64>
    scf.yield %s : f64
  }
  return %r : f64
}

// -----

// Block sizes between min-block 4 and block 16: the largest the loop holds
// twice with fewer than 4 iterations after its last whole block. 64: 16.
// 40: not 16 (8 left over) but 8. 10: neither 16 nor 8 (not twice), 4
// (the smallest takes any rest), the last 2 in a copy of the loop.
// CHECK-LABEL: func.func @sizes
// SIZES-LABEL: func.func @sizes
// SIZES: scf.for %{{.*}} = %{{.*}} to %c64{{.*}} step %c16 iter_args
// SIZES: scf.for %{{.*}} = %{{.*}} to %c16 step %c1
// SIZES: scf.for %{{.*}} = %{{.*}} to %c40{{.*}} step %c8 iter_args
// SIZES: scf.for %{{.*}} = %{{.*}} to %c8 step %c1
// SIZES: scf.for %{{.*}} = %{{.*}} to %c8{{.*}} step %c4 iter_args
// SIZES: scf.for %{{.*}} = %{{.*}} to %c4 step %c1
// SIZES: scf.for %{{.*}} = %c8{{.*}} to %c10 step %c1
func.func @sizes(%x: memref<64xf32>) -> (f64, f64, f64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %r:3 = scf.for %n = %c0 to %c1 step %c1 iter_args(%u = %zero, %v = %zero, %w = %zero) -> (f64, f64, f64) {
    %c64 = arith.constant 64 : index
    %c40 = arith.constant 40 : index
    %c10 = arith.constant 10 : index
    %a = scf.for %j = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f64) {
      %e = memref.load %x[%j] : memref<64xf32>
      %ew = arith.extf %e : f32 to f64
      %s = arith.addf %acc, %ew fastmath<reassoc> : f64
      scf.yield %s : f64
    }
    %b = scf.for %j = %c0 to %c40 step %c1 iter_args(%acc = %zero) -> (f64) {
      %e = memref.load %x[%j] : memref<64xf32>
      %ew = arith.extf %e : f32 to f64
      %s = arith.addf %acc, %ew fastmath<reassoc> : f64
      scf.yield %s : f64
    }
    %c = scf.for %j = %c0 to %c10 step %c1 iter_args(%acc = %zero) -> (f64) {
      %e = memref.load %x[%j] : memref<64xf32>
      %ew = arith.extf %e : f32 to f64
      %s = arith.addf %acc, %ew fastmath<reassoc> : f64
      scf.yield %s : f64
    }
    scf.yield %a, %b, %c : f64, f64, f64
  }
  return %r#0, %r#1, %r#2 : f64, f64, f64
}
