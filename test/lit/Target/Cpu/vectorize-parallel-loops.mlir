// RUN: kiln-opt %s -kiln-cpu-vectorize-parallel-loops=lanes=4 -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-vectorize-parallel-loops=lanes=4 -expand-strided-metadata -convert-scf-to-cf -kiln-cpu-convert-to-llvm -reconcile-unrealized-casts -split-input-file | FileCheck %s --check-prefix=LLVM

// An optimizer's in-place update (kiln-cpu-mark-parallel-loops marked it):
// loads and stores at [row, j] become vector ones, the uniform learning
// rate and the row's scalar (a load at [row]) are broadcast, the loop steps
// by the lanes and is marked vectorised, its access group kept.
// CHECK: #[[G:.*]] = #llvm.access_group<id = distinct[0]<>>
// CHECK: #[[V:.*]] = #llvm.loop_annotation<isVectorized = true, parallelAccesses = #[[G]]>
// CHECK-LABEL: func.func @update
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[LR:.*]] = vector.broadcast %{{.*}} : f32 to vector<4xf32>
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %[[C4]] {
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%[[I]]] : memref<2xf32>
// CHECK: %[[P:.*]] = vector.load %{{.*}}[%[[I]], %[[J]]] : memref<2x8xf32>, vector<4xf32>
// CHECK: %[[Q:.*]] = vector.load %{{.*}}[%[[I]], %[[J]]] : memref<2x8xf32>, vector<4xf32>
// CHECK: %[[M:.*]] = arith.mulf %[[Q]], %[[LR]] : vector<4xf32>
// CHECK: %[[SB:.*]] = vector.broadcast %[[S]] : f32 to vector<4xf32>
// CHECK: %[[N:.*]] = arith.mulf %[[M]], %[[SB]] : vector<4xf32>
// CHECK: %[[D:.*]] = arith.subf %[[P]], %[[N]] : vector<4xf32>
// CHECK: vector.store %[[D]], %{{.*}}[%[[I]], %[[J]]] : memref<2x8xf32>, vector<4xf32>
// CHECK: } {llvm.loop_annotation = #[[V]]}
// LLVM-LABEL: llvm.func @update
// LLVM: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
// LLVM: llvm.fmul %{{.*}} : vector<4xf32>
// LLVM: llvm.store %{{.*}} {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
#g = #llvm.access_group<id = distinct[0]<>>
#l = #llvm.loop_annotation<parallelAccesses = #g>
func.func @update(%p: memref<2x8xf32>, %g: memref<2x8xf32>, %scale: memref<2xf32>, %out: memref<2x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %lr = arith.constant 0.1 : f32
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %s = memref.load %scale[%i] : memref<2xf32>
      %a = memref.load %p[%i, %j] : memref<2x8xf32>
      %b = memref.load %g[%i, %j] : memref<2x8xf32>
      %m = arith.mulf %b, %lr : f32
      %n = arith.mulf %m, %s : f32
      %d = arith.subf %a, %n : f32
      memref.store %d, %out[%i, %j] : memref<2x8xf32>
    } {llvm.loop_annotation = #l}
  }
  return
}

// -----

// The loop's variable as a value (an iota, a causal mask's column) becomes
// its lanes: the variable broadcast plus 0, 1, 2, 3. A loop over the
// middle dimension of [2, 8, 1] (trailing size 1) accesses a view with that
// dimension collapsed, made once before the loop. The interleave count the
// annotation asks for widens the vectors where the length divides (8 = 4 x
// 2); LLVM's code generator splits them into that many.
// CHECK-LABEL: func.func @iota_and_trailing_one
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : memref<2x8x1xf32> into memref<2x8xf32>
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[B:.*]] = vector.broadcast %[[J]] : index to vector<8xindex>
// CHECK: %[[LANES:.*]] = arith.addi %[[B]], %{{.*}} : vector<8xindex>
// CHECK: arith.index_cast %[[LANES]] : vector<8xindex> to vector<8xi64>
// CHECK: vector.store %{{.*}}, %[[FLAT]][%{{.*}}, %[[J]]] : memref<2x8xf32>, vector<8xf32>
// CHECK: } {llvm.loop_annotation = #{{.*}}}
#g = #llvm.access_group<id = distinct[0]<>>
#i2 = #llvm.loop_interleave<count = 2 : i32>
#l = #llvm.loop_annotation<interleave = #i2, parallelAccesses = #g>
func.func @iota_and_trailing_one(%out: memref<2x8x1xf32>, %r: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %j = %c0 to %c8 step %c1 {
    %k = arith.index_cast %j : index to i64
    %f = arith.sitofp %k : i64 to f32
    memref.store %f, %out[%r, %j, %c0] : memref<2x8x1xf32>
  } {llvm.loop_annotation = #l}
  return
}

// -----

// Left to LLVM's vectoriser: a loop not marked parallel, one that carries
// a sum, one whose length the lanes do not divide, a transposing copy (the
// variable indexes a dimension of stride 8), a memref of i1 (bit-packed as
// a vector), a streaming store, and a gather (an index loaded in the loop).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: vector.
// CHECK-NOT: isVectorized
// CHECK: return
#g = #llvm.access_group<id = distinct[0]<>>
#l = #llvm.loop_annotation<parallelAccesses = #g>
func.func @left_alone(%x: memref<8xf32>, %y: memref<8xf32>, %t: memref<8x8xf32>, %m: memref<8xi1>,
                      %mo: memref<8xi1>, %ix: memref<8xi64>, %z: memref<6xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %x[%j] : memref<8xf32>
    memref.store %v, %y[%j] : memref<8xf32>
  }
  %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> (f32) {
    %v = memref.load %x[%j] : memref<8xf32>
    %s = arith.addf %a, %v : f32
    scf.yield %s : f32
  } {llvm.loop_annotation = #l}
  scf.for %j = %c0 to %c6 step %c1 {
    %v = memref.load %z[%j] : memref<6xf32>
    memref.store %v, %z[%j] : memref<6xf32>
  } {llvm.loop_annotation = #l}
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %t[%j, %c0] : memref<8x8xf32>
    memref.store %v, %y[%j] : memref<8xf32>
  } {llvm.loop_annotation = #l}
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %m[%j] : memref<8xi1>
    memref.store %v, %mo[%j] : memref<8xi1>
  } {llvm.loop_annotation = #l}
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.load %x[%j] : memref<8xf32>
    memref.store %v, %y[%j] {nontemporal = true} : memref<8xf32>
  } {llvm.loop_annotation = #l}
  scf.for %j = %c0 to %c8 step %c1 {
    %k64 = memref.load %ix[%j] : memref<8xi64>
    %k = arith.index_cast %k64 : i64 to index
    %v = memref.load %x[%k] : memref<8xf32>
    memref.store %v, %y[%j] : memref<8xf32>
  } {llvm.loop_annotation = #l}
  return %sum : f32
}
