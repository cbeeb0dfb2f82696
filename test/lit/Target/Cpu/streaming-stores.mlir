// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-streaming-stores{num-inputs=1 num-outputs=2 min-bytes=1024}))' -split-input-file | FileCheck %s

// Two out-params: %big (4 KiB) is only stored to, through a view, in a
// light loop: its stores stream. %small (256 B) is below min-bytes.
// CHECK-LABEL: func.func @light_loop
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] {nontemporal = true} : memref<1024xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<64xf32>
func.func @light_loop(%x: memref<1024xf32>, %big: memref<1024xf32>, %small: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %flat = memref.reinterpret_cast %big to offset: [0], sizes: [1024], strides: [1] : memref<1024xf32> to memref<1024xf32>
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %x[%i] : memref<1024xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %flat[%i] : memref<1024xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %v = memref.load %x[%i] : memref<1024xf32>
    memref.store %v, %small[%i] : memref<64xf32>
  }
  return
}

// -----

// The kernel reads %out back (a row written, then normalised): the lines
// it stores are wanted in the cache, so its stores stay plain; %other is
// only stored to and streams.
// CHECK-LABEL: func.func @read_back
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}] : memref<1024xf32>
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] {nontemporal = true} : memref<1024xf32>
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}] : memref<1024xf32>
func.func @read_back(%x: memref<1024xf32>, %out: memref<1024xf32>, %other: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %x[%i] : memref<1024xf32>
    memref.store %v, %out[%i] : memref<1024xf32>
  }
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %out[%i] : memref<1024xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %other[%i] : memref<1024xf32>
    memref.store %w, %out[%i] : memref<1024xf32>
  }
  return
}

// -----

// An output handed to a call (the runtime's GEMM writes it) keeps plain
// stores. An output written by a long loop body streams like any other:
// the body's arithmetic does not make the write-allocate reads free.
// CHECK-LABEL: func.func @call_and_heavy_loop
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}] : memref<1024xf32>
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] {nontemporal = true} : memref<1024xf32>
func.func private @writes(memref<1024xf32>)
func.func @call_and_heavy_loop(%x: memref<1024xf32>, %called: memref<1024xf32>, %heavy: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %v0 = memref.load %x[%c0] : memref<1024xf32>
  memref.store %v0, %called[%c0] : memref<1024xf32>
  func.call @writes(%called) : (memref<1024xf32>) -> ()
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %x[%i] : memref<1024xf32>
    %a1 = arith.mulf %v, %v : f32
    %a2 = arith.mulf %a1, %v : f32
    %a3 = arith.mulf %a2, %v : f32
    %a4 = arith.mulf %a3, %v : f32
    %a5 = arith.mulf %a4, %v : f32
    %a6 = arith.mulf %a5, %v : f32
    %a7 = arith.mulf %a6, %v : f32
    %a8 = arith.mulf %a7, %v : f32
    %a9 = arith.mulf %a8, %v : f32
    %a10 = arith.mulf %a9, %v : f32
    %a11 = arith.mulf %a10, %v : f32
    %a12 = arith.mulf %a11, %v : f32
    %a13 = arith.mulf %a12, %v : f32
    %a14 = arith.mulf %a13, %v : f32
    %a15 = arith.mulf %a14, %v : f32
    %a16 = arith.mulf %a15, %v : f32
    %a17 = arith.mulf %a16, %v : f32
    %a18 = arith.mulf %a17, %v : f32
    %a19 = arith.mulf %a18, %v : f32
    %a20 = arith.mulf %a19, %v : f32
    %a21 = arith.mulf %a20, %v : f32
    %a22 = arith.mulf %a21, %v : f32
    %a23 = arith.mulf %a22, %v : f32
    %a24 = arith.mulf %a23, %v : f32
    memref.store %a24, %heavy[%i] : memref<1024xf32>
  }
  return
}

// -----

// Long loop bodies stream only where their vectors can be aligned: %lined's
// rows are whole 64-byte lines, %ragged's (80 bytes) are not, and an
// unaligned streaming store would be written in 8-byte pieces.
// CHECK-LABEL: func.func @heavy_rows
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}, %{{.*}}] : memref<32x20xf32>
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}] {nontemporal = true} : memref<16x16xf32>
func.func @heavy_rows(%x: memref<1024xf32>, %ragged: memref<32x20xf32>, %lined: memref<16x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c20 = arith.constant 20 : index
  %c32 = arith.constant 32 : index
  scf.for %i = %c0 to %c32 step %c1 {
    scf.for %j = %c0 to %c20 step %c1 {
      %v = memref.load %x[%j] : memref<1024xf32>
      %a1 = arith.mulf %v, %v : f32
      %a2 = arith.mulf %a1, %v : f32
      %a3 = arith.mulf %a2, %v : f32
      %a4 = arith.mulf %a3, %v : f32
      %a5 = arith.mulf %a4, %v : f32
      %a6 = arith.mulf %a5, %v : f32
      %a7 = arith.mulf %a6, %v : f32
      %a8 = arith.mulf %a7, %v : f32
      %a9 = arith.mulf %a8, %v : f32
      %a10 = arith.mulf %a9, %v : f32
      %a11 = arith.mulf %a10, %v : f32
      %a12 = arith.mulf %a11, %v : f32
      %a13 = arith.mulf %a12, %v : f32
      %a14 = arith.mulf %a13, %v : f32
      %a15 = arith.mulf %a14, %v : f32
      %a16 = arith.mulf %a15, %v : f32
      %a17 = arith.mulf %a16, %v : f32
      %a18 = arith.mulf %a17, %v : f32
      %a19 = arith.mulf %a18, %v : f32
      %a20 = arith.mulf %a19, %v : f32
      %a21 = arith.mulf %a20, %v : f32
      %a22 = arith.mulf %a21, %v : f32
      %a23 = arith.mulf %a22, %v : f32
      %a24 = arith.mulf %a23, %v : f32
      %a25 = arith.mulf %a24, %v : f32
      memref.store %a25, %ragged[%i, %j] : memref<32x20xf32>
    }
  }
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %v = memref.load %x[%j] : memref<1024xf32>
      %a1 = arith.mulf %v, %v : f32
      %a2 = arith.mulf %a1, %v : f32
      %a3 = arith.mulf %a2, %v : f32
      %a4 = arith.mulf %a3, %v : f32
      %a5 = arith.mulf %a4, %v : f32
      %a6 = arith.mulf %a5, %v : f32
      %a7 = arith.mulf %a6, %v : f32
      %a8 = arith.mulf %a7, %v : f32
      %a9 = arith.mulf %a8, %v : f32
      %a10 = arith.mulf %a9, %v : f32
      %a11 = arith.mulf %a10, %v : f32
      %a12 = arith.mulf %a11, %v : f32
      %a13 = arith.mulf %a12, %v : f32
      %a14 = arith.mulf %a13, %v : f32
      %a15 = arith.mulf %a14, %v : f32
      %a16 = arith.mulf %a15, %v : f32
      %a17 = arith.mulf %a16, %v : f32
      %a18 = arith.mulf %a17, %v : f32
      %a19 = arith.mulf %a18, %v : f32
      %a20 = arith.mulf %a19, %v : f32
      %a21 = arith.mulf %a20, %v : f32
      %a22 = arith.mulf %a21, %v : f32
      %a23 = arith.mulf %a22, %v : f32
      %a24 = arith.mulf %a23, %v : f32
      %a25 = arith.mulf %a24, %v : f32
      memref.store %a25, %lined[%i, %j] : memref<16x16xf32>
    }
  }
  return
}
