// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-streaming-stores{num-inputs=1 num-outputs=1 min-bytes=1024 min-footprint-bytes=8192}))' | FileCheck %s --check-prefix=STREAM
// RUN: kiln-opt %s -pass-pipeline='builtin.module(func.func(kiln-cpu-streaming-stores{num-inputs=1 num-outputs=1 min-bytes=1024 min-footprint-bytes=8193}))' | FileCheck %s --check-prefix=PLAIN

// The kernel's input and output take 8192 bytes in all. At a footprint
// threshold of 8192 (half of a 16 KiB last-level cache) its output streams;
// one byte more, and what it writes is expected to stay in cache for the
// next kernel: its stores stay plain.
// STREAM-LABEL: func.func @footprint
// STREAM: memref.store %{{.*}}, %{{.*}}[%{{.*}}] {nontemporal = true} : memref<1024xf32>
// PLAIN-LABEL: func.func @footprint
// PLAIN-NOT: nontemporal
func.func @footprint(%x: memref<1024xf32>, %out: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %x[%i] : memref<1024xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %out[%i] : memref<1024xf32>
  }
  return
}
