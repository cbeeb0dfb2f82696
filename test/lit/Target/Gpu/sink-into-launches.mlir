// RUN: kiln-opt %s -kiln-gpu-sink-into-launches | FileCheck %s --check-prefixes=CHECK,SINK
// RUN: kiln-opt %s -kiln-gpu-sink-into-launches=sink-scratch-views=false | FileCheck %s --check-prefixes=CHECK,KEEP

// The reshape of an argument and the index arithmetic move into the
// launch, so it captures the base buffer; a view of the scratch buffer
// moves only with sink-scratch-views (SPIR-V passes it as an argument).
// CHECK-LABEL: func.func @sink
// SINK: gpu.launch
// SINK-DAG: memref.expand_shape %arg0
// SINK-DAG: memref.view %arg2
// KEEP: %[[VIEW:.*]] = memref.view %arg2
// KEEP: gpu.launch
// KEEP-NOT: memref.view
// KEEP: memref.expand_shape %arg0
// KEEP-NOT: memref.view
// KEEP: memref.store %{{.*}}, %[[VIEW]][
// SINK-NOT: memref.store %{{.*}}, %view[
// SINK-NOT: memref.load %expand_shape[
func.func @sink(%x: memref<64xf32>, %y: memref<8x8xf32>, %scratch: memref<256xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = memref.expand_shape %x [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  %t = memref.view %scratch[%c0][] : memref<256xi8> to memref<8x8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %r[%bx, %tx] : memref<8x8xf32>
    memref.store %v, %t[%bx, %tx] : memref<8x8xf32>
    memref.store %v, %y[%tx, %bx] : memref<8x8xf32>
    gpu.terminator
  }
  return
}
