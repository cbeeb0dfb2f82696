// RUN: kiln-opt %s -kiln-cpu-assign-scratch="share-distance=0" -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-assign-scratch="share-distance=1" -split-input-file | FileCheck %s --check-prefix=APART

// %t is dead (its last use, the first copy) before %u is first written (the
// second copy): at distance 0 they share bytes 0..63; at distance 1 the two
// neighbouring copies keep them apart.
// CHECK-LABEL: func.func @dead_before_born
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<64xi8>
// CHECK-SAME: kiln.scratch_bytes = 64 : i64
// CHECK: %[[T:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.view %[[S]][%[[T]]][] : memref<64xi8> to memref<4xf32>
// CHECK: %[[U:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.view %[[S]][%[[U]]][] : memref<64xi8> to memref<4xf32>
// APART-LABEL: func.func @dead_before_born
// APART-SAME: kiln.scratch_bytes = 128 : i64
func.func @dead_before_born(%x: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %out, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// One operation reads %t for the last time and writes %u for the first:
// their lives meet there, and they never share.
// CHECK-LABEL: func.func @read_and_written_by_one_op
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func @read_and_written_by_one_op(%x: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %t, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// %t's life goes on through a view of it (expand_shape) read after %u is
// written, so they stay apart; the pure view itself is no operation.
// CHECK-LABEL: func.func @live_through_a_view
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func @live_through_a_view(%x: memref<4xf32>, %out: memref<4xf32>, %out2: memref<2x2xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  %v = memref.expand_shape %t [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  memref.copy %x, %out : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %x, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  memref.copy %v, %out2 : memref<2x2xf32> to memref<2x2xf32>
  return
}

// -----

// A use inside a top-level loop counts as the whole loop: %t, read in the
// loop's body, and %u, written by the same loop, stay apart.
// CHECK-LABEL: func.func @live_over_a_loop
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func @live_over_a_loop(%x: memref<4xf32>, %out: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.alloc() : memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  scf.for %i = %c0 to %n step %c1 {
    memref.copy %t, %out : memref<4xf32> to memref<4xf32>
    memref.copy %x, %u : memref<4xf32> to memref<4xf32>
  }
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// An address taken from %t (for a runtime call, as the convolution and
// matmul calls take theirs) keeps %t live until the call that uses it.
// CHECK-LABEL: func.func @live_through_its_address
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func private @consume(index)
func.func @live_through_its_address(%x: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %t : memref<4xf32> -> index
  memref.copy %x, %out : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %x, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  func.call @consume(%p) : (index) -> ()
  return
}

// -----

// Three lives, the large one in the middle: the two short ones, apart in
// time, take the same bytes beside it (largest placed first, lowest offset).
// CHECK-LABEL: func.func @largest_first
// CHECK-SAME: kiln.scratch_bytes = 192 : i64
// CHECK: %[[A:.*]] = arith.constant 128 : index
// CHECK-NEXT: memref.view %{{.*}}[%[[A]]][] : memref<192xi8> to memref<4xf32>
// CHECK: %[[BIG:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.view %{{.*}}[%[[BIG]]][] : memref<192xi8> to memref<32xf32>
// CHECK: %[[B:.*]] = arith.constant 128 : index
// CHECK-NEXT: memref.view %{{.*}}[%[[B]]][] : memref<192xi8> to memref<4xf32>
func.func @largest_first(%x: memref<4xf32>, %y: memref<32xf32>, %out: memref<4xf32>, %out2: memref<32xf32>) {
  %a = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  %big = memref.alloc() : memref<32xf32>
  memref.copy %y, %big : memref<32xf32> to memref<32xf32>
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.copy %x, %b : memref<4xf32> to memref<4xf32>
  memref.copy %b, %out : memref<4xf32> to memref<4xf32>
  memref.copy %big, %out2 : memref<32xf32> to memref<32xf32>
  return
}

// -----

// A temporary yielded out of a region lives on as the region op's result:
// %t, read through %r after %u is written, stays apart from it.
// CHECK-LABEL: func.func @live_through_a_yield
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func @live_through_a_yield(%x: memref<4xf32>, %out: memref<4xf32>, %c: i1) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  %r = scf.if %c -> memref<4xf32> {
    scf.yield %t : memref<4xf32>
  } else {
    scf.yield %x : memref<4xf32>
  }
  memref.copy %x, %out : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %x, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  memref.copy %r, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// An address stored to memory may be read back anywhere: %t never shares.
// CHECK-LABEL: func.func @address_stored
// CHECK-SAME: kiln.scratch_bytes = 128 : i64
func.func @address_stored(%x: memref<4xf32>, %out: memref<4xf32>, %slot: memref<index>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %x, %t : memref<4xf32> to memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %t : memref<4xf32> -> index
  memref.store %p, %slot[] : memref<index>
  memref.copy %x, %out : memref<4xf32> to memref<4xf32>
  %u = memref.alloc() : memref<4xf32>
  memref.copy %x, %u : memref<4xf32> to memref<4xf32>
  memref.copy %u, %out : memref<4xf32> to memref<4xf32>
  return
}
