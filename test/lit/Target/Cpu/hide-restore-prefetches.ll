; RUN: opt -load-pass-plugin=%kiln_llvm_passes -mtriple=x86_64-unknown-linux-gnu -mattr=+avx2 \
; RUN:   -passes='function(kiln-hide-prefetches,loop-vectorize,kiln-restore-prefetches)' -S %s | FileCheck %s
; RUN: opt -load-pass-plugin=%kiln_llvm_passes -mtriple=x86_64-unknown-linux-gnu \
; RUN:   -passes='function(kiln-hide-prefetches)' -S %s | FileCheck %s --check-prefix=HIDDEN

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; A loop that prefetches the next row's element before each load of the
; current row's. Hidden, the prefetch is a call to the marker, which names
; its vector variants; the loop vectorises (a call to llvm.prefetch would
; stop it); restored, each vector call is one prefetch of its first lane's
; address, and the marker and its variants are gone.
; HIDDEN-LABEL: define void @scale(
; HIDDEN-NOT: llvm.prefetch
; HIDDEN: call void @kiln_prefetch_marker(ptr %{{.*}}) #[[ATTRS:[0-9]+]]
; CHECK-LABEL: define void @scale(
; CHECK: vector.body:
; CHECK: call void @llvm.prefetch.p0(ptr %{{.*}}, i32 0, i32 3, i32 1)
; CHECK: load <8 x float>
; CHECK: store <8 x float>
; CHECK-NOT: kiln_prefetch_marker
define void @scale(ptr noalias %in, ptr noalias %next, ptr noalias %out) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %ahead = getelementptr inbounds float, ptr %next, i64 %i
  call void @llvm.prefetch.p0(ptr %ahead, i32 0, i32 3, i32 1)
  %src = getelementptr inbounds float, ptr %in, i64 %i
  %x = load float, ptr %src, align 4
  %y = fmul float %x, 2.0
  %dst = getelementptr inbounds float, ptr %out, i64 %i
  store float %y, ptr %dst, align 4
  %i.next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %i.next, 4096
  br i1 %done, label %exit, label %loop

exit:
  ret void
}

; Other kinds of prefetch (here a write) are left as they are.
; HIDDEN-LABEL: define void @write_prefetch(
; HIDDEN: call void @llvm.prefetch.p0(ptr %p, i32 1, i32 3, i32 1)
define void @write_prefetch(ptr %p) {
  call void @llvm.prefetch.p0(ptr %p, i32 1, i32 3, i32 1)
  ret void
}

declare void @llvm.prefetch.p0(ptr, i32 immarg, i32 immarg, i32 immarg)

; The marker's call names its vector variants.
; HIDDEN: attributes #[[ATTRS]] = { "vector-function-abi-variant"="_ZGV_LLVM_N2v_kiln_prefetch_marker(kiln_prefetch_marker_v2),{{.*}}_ZGV_LLVM_N8v_kiln_prefetch_marker(kiln_prefetch_marker_v8),
