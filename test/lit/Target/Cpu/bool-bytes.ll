; RUN: opt -load-pass-plugin=%kiln_llvm_passes -passes='function(kiln-bool-bytes)' -S %s | FileCheck %s
; RUN: opt -load-pass-plugin=%kiln_llvm_passes -passes='function(kiln-bool-bytes,loop-vectorize)' -force-vector-width=16 -force-vector-interleave=1 -S %s | FileCheck %s --check-prefix=VEC

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; A bool element is a byte: its load becomes an i8 load truncated to i1 and
; its store a zext and an i8 store, each keeping its alignment and metadata.
; CHECK-LABEL: define void @select_by_mask(
; CHECK: %[[B:.*]] = load i8, ptr %mp, align 1, !llvm.access.group ![[G:[0-9]+]]
; CHECK-NEXT: %[[M:.*]] = trunc i8 %[[B]] to i1
; CHECK: select i1 %[[M]]
; CHECK: %[[Z:.*]] = zext i1 %[[M]] to i8
; CHECK-NEXT: store i8 %[[Z]], ptr %op, align 1, !llvm.access.group ![[G]]
; CHECK-NOT: load i1
; CHECK-NOT: store i1
; The vectoriser then widens the bytes: one load of 16 of them, not 16 loads.
; VEC-LABEL: define void @select_by_mask(
; VEC: load <16 x i8>
; VEC: trunc <16 x i8> %{{.*}} to <16 x i1>
; VEC: store <16 x i8>
define void @select_by_mask(ptr noalias %mask, ptr noalias %x, ptr noalias %y, ptr noalias %out) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %mp = getelementptr inbounds i1, ptr %mask, i64 %i
  %m = load i1, ptr %mp, align 1, !llvm.access.group !0
  %xp = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %xp, align 4, !llvm.access.group !0
  %s = select i1 %m, float %v, float -1.000000e+09
  %yp = getelementptr inbounds float, ptr %y, i64 %i
  store float %s, ptr %yp, align 4, !llvm.access.group !0
  %op = getelementptr inbounds i1, ptr %out, i64 %i
  store i1 %m, ptr %op, align 1, !llvm.access.group !0
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, 64
  br i1 %done, label %exit, label %loop, !llvm.loop !1

exit:
  ret void
}

!0 = distinct !{}
!1 = distinct !{!1, !2}
!2 = !{!"llvm.loop.parallel_accesses", !0}
