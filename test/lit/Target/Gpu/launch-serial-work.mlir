// RUN: kiln-opt %s -kiln-gpu-launch-serial-work | FileCheck %s

// Work left on the host between launches (a whole-tensor sum's serial
// loop and its initial store) becomes one launch of one thread; the
// launch already there stays as it is.
// CHECK-LABEL: func.func @serial
// CHECK: arith.constant 0.0
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]])
// CHECK-NEXT: memref.store
// CHECK-NEXT: scf.for
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: arith.negf
// CHECK-NOT: gpu.launch
func.func @serial(%x: memref<64xf32>, %sum: memref<f32>, %y: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  memref.store %zero, %sum[] : memref<f32>
  scf.for %k = %c0 to %c64 step %c1 {
    %v = memref.load %x[%k] : memref<64xf32>
    %a = memref.load %sum[] : memref<f32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %sum[] : memref<f32>
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<64xf32>
    %n = arith.negf %v : f32
    memref.store %n, %y[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
