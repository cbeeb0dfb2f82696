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

// A scalar an earlier launch wrote (a loss) moves into the launch that
// computes with it: the stream orders the read after the write.
// CHECK-LABEL: func.func @sink_load
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NEXT: memref.load %arg1[]
func.func @sink_load(%x: memref<8xf32>, %loss: memref<f32>, %y: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %zero, %loss[] : memref<f32>
    gpu.terminator
  }
  %l = memref.load %loss[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<8xf32>
    %s = arith.mulf %v, %l : f32
    memref.store %s, %y[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}

// A launch between the load and its use writes the loaded buffer: moved
// into the later launch, the load would read the new value. It stays on
// the host (where compilation rejects it: the trace stays interpreted);
// the arithmetic on it still moves.
// CHECK-LABEL: func.func @load_overwritten_before_use
// CHECK: %[[L:.*]] = memref.load %arg1[]
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NOT: memref.load %arg1[]
// CHECK: arith.addf %[[L]],
func.func @load_overwritten_before_use(%x: memref<8xf32>, %loss: memref<f32>, %y: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  %l = memref.load %loss[] : memref<f32>
  %l1 = arith.addf %l, %one : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %one, %loss[] : memref<f32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<8xf32>
    %s = arith.mulf %v, %l1 : f32
    memref.store %s, %y[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}

// Serial work (one thread) that accumulates into the slot it loads: its
// copy of the load comes first, before its own store, so it moves in. A
// launch of many threads that writes the loaded buffer would race with its
// own copies of the load: the load stays on the host.
// CHECK-LABEL: func.func @accumulate_in_one_thread
// CHECK: gpu.launch
// CHECK-NEXT: memref.load %arg0[]
// CHECK-LABEL: func.func @many_threads_write_the_loaded_buffer
// CHECK: %[[L:.*]] = memref.load %arg0[%
// CHECK: gpu.launch
// CHECK-NOT: memref.load %arg0[%c0
// CHECK: arith.addf %[[L]],
func.func @accumulate_in_one_thread(%acc: memref<f32>, %x: memref<f32>) {
  %c1 = arith.constant 1 : index
  %a = memref.load %acc[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[] : memref<f32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %acc[] : memref<f32>
    gpu.terminator
  }
  return
}
func.func @many_threads_write_the_loaded_buffer(%buf: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %a = memref.load %buf[%c0] : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %v = memref.load %buf[%tx] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    memref.store %s, %buf[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}
