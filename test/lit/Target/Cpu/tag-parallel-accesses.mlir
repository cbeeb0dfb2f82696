// RUN: kiln-opt %s -kiln-cpu-tag-parallel-accesses | FileCheck %s

// The annotation the lowering leaves on the back edge becomes the branch's
// loop annotation, and the loop's load and store (header to latch) join its
// access group; the load before the loop does not.
// CHECK: #[[G:.*]] = #llvm.access_group<id = distinct[0]<>>
// CHECK: #[[L:.*]] = #llvm.loop_annotation<parallelAccesses = #[[G]]>
// CHECK-LABEL: llvm.func @loop
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NOT: access_groups
// CHECK: ^bb2:
// CHECK: llvm.load %{{.*}} {access_groups = [#[[G]]]} : !llvm.ptr -> f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {access_groups = [#[[G]]]} : f32, !llvm.ptr
// CHECK: llvm.br ^bb1(%{{.*}} : i64) {loop_annotation = #[[L]]}
// CHECK-NOT: llvm.loop_annotation
#group = #llvm.access_group<id = distinct[0]<>>
#annotation = #llvm.loop_annotation<parallelAccesses = #group>
llvm.func @loop(%a: !llvm.ptr, %b: !llvm.ptr, %n: i64) -> f32 {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %first = llvm.load %a : !llvm.ptr -> f32
  llvm.br ^bb1(%c0 : i64)
^bb1(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %pa = llvm.getelementptr %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %pa : !llvm.ptr -> f32
  %w = llvm.fadd %v, %v : f32
  %pb = llvm.getelementptr %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %w, %pb : f32, !llvm.ptr
  %next = llvm.add %i, %c1 : i64
  llvm.br ^bb1(%next : i64) {llvm.loop_annotation = #annotation}
^bb3:
  llvm.return %first : f32
}
