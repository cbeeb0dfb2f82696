; RUN: opt -load-pass-plugin=%kiln_llvm_passes -mtriple=x86_64-unknown-linux-gnu -mattr=+avx2 \
; RUN:   -passes='function(kiln-hide-nontemporal,loop-vectorize,kiln-restore-nontemporal)' -S %s | FileCheck %s
; RUN: opt -load-pass-plugin=%kiln_llvm_passes -mtriple=x86_64-unknown-linux-gnu \
; RUN:   -passes='function(kiln-hide-nontemporal)' -S %s | FileCheck %s --check-prefix=HIDDEN

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; A scalar streaming store in a loop. Hidden, the mark is a scope of Kiln's
; own (the vectoriser refuses non-temporal scalar stores it cannot prove
; aligned); the loop vectorises; restored, the vector stores are
; non-temporal again and the function fences them before it returns.
; HIDDEN-LABEL: define void @scale(
; HIDDEN-NOT: !nontemporal
; HIDDEN: store float %{{.*}}, ptr %{{.*}}, align 4, !alias.scope ![[LIST:[0-9]+]]
; HIDDEN: ![[LIST]] = !{![[SCOPE:[0-9]+]]}
; HIDDEN: ![[SCOPE]] = !{!"kiln.streaming.store", ![[DOMAIN:[0-9]+]]}
; HIDDEN: ![[DOMAIN]] = !{!"kiln.streaming"}
; CHECK-LABEL: define void @scale(
; CHECK: store <8 x float> %{{.*}}, ptr %{{.*}}, align 4, !nontemporal
; CHECK: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
; CHECK-NOT: kiln.streaming.store
define void @scale(ptr noalias %in, ptr noalias %out) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %src = getelementptr inbounds float, ptr %in, i64 %i
  %x = load float, ptr %src, align 4
  %y = fmul float %x, 2.0
  %dst = getelementptr inbounds float, ptr %out, i64 %i
  store float %y, ptr %dst, align 4, !nontemporal !0
  %i.next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %i.next, 4096
  br i1 %done, label %exit, label %loop

exit:
  ret void
}

!0 = !{i32 1}
