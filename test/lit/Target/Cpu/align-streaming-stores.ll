; RUN: opt -load-pass-plugin=%kiln_llvm_passes -passes=kiln-align-streaming-stores -S %s | FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Rows of 1024 floats streamed out 8 lanes at a time, the buffer loaded from
; the argument array (as a parallel body's trampoline does): the entry tests
; the buffer's alignment after the load and tail-calls a clone in which the
; buffer is assumed aligned and each row's vector store is proven aligned.
; The function's own body keeps the store as it was.
; CHECK-LABEL: define void @rows(
; CHECK: %scratch = alloca [64 x i8], align 64
; CHECK: %out = load ptr, ptr %args
; CHECK: %[[I:.*]] = ptrtoint ptr %out to i64
; CHECK: %[[LOW:.*]] = and i64 %[[I]], 31
; CHECK: %[[OK:.*]] = icmp eq i64 %[[LOW]], 0
; CHECK: br i1 %[[OK]], label %aligned, label %
; CHECK: aligned:
; CHECK-NEXT: musttail call void @rows.aligned_streaming(ptr %args, i64 %lb, i64 %ub)
; CHECK-NEXT: ret void
; CHECK: store <8 x float> zeroinitializer, ptr %{{.*}}, align 4, !nontemporal
; (The clones follow the module's functions: see the end.)
define void @rows(ptr %args, i64 %lb, i64 %ub) {
entry:
  %scratch = alloca [64 x i8], align 64
  %out = load ptr, ptr %args, align 8
  call void @use(ptr %scratch)
  br label %row

row:
  %r = phi i64 [ %lb, %entry ], [ %r.next, %row.end ]
  %off = shl nuw nsw i64 %r, 12
  %rowp = getelementptr inbounds i8, ptr %out, i64 %off
  br label %vec

vec:
  %i = phi i64 [ 0, %row ], [ %i.next, %vec ]
  %p = getelementptr inbounds float, ptr %rowp, i64 %i
  store <8 x float> zeroinitializer, ptr %p, align 4, !nontemporal !0
  %i.next = add nuw nsw i64 %i, 8
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %row.end, label %vec

row.end:
  %r.next = add i64 %r, 1
  %rows.done = icmp eq i64 %r.next, %ub
  br i1 %rows.done, label %exit, label %row

exit:
  ret void
}

; A flat loop from %lb: no alignment can be proven for a chunk that starts
; anywhere, so no clone is kept and the function is unchanged.
; CHECK-LABEL: define void @flat(
; CHECK-NOT: aligned_streaming
; CHECK: store <8 x float> zeroinitializer, ptr %{{.*}}, align 4, !nontemporal
; CHECK: ret void
define void @flat(ptr %out, i64 %lb, i64 %ub) {
entry:
  br label %vec

vec:
  %i = phi i64 [ %lb, %entry ], [ %i.next, %vec ]
  %p = getelementptr inbounds float, ptr %out, i64 %i
  store <8 x float> zeroinitializer, ptr %p, align 4, !nontemporal !0
  %i.next = add nsw i64 %i, 8
  %done = icmp sge i64 %i.next, %ub
  br i1 %done, label %exit, label %vec

exit:
  ret void
}

; The same flat loop whose chunks start at multiples of 16 elements (the
; trampoline's assume, ParallelChunks.h): the clone's stores are aligned.
; CHECK-LABEL: define void @flat_aligned_chunks(
; CHECK: musttail call void @flat_aligned_chunks.aligned_streaming(ptr %out, i64 %lb, i64 %ub)
define void @flat_aligned_chunks(ptr %out, i64 %lb, i64 %ub) {
entry:
  %low = and i64 %lb, 15
  %chunk.aligned = icmp eq i64 %low, 0
  call void @llvm.assume(i1 %chunk.aligned)
  br label %vec

vec:
  %i = phi i64 [ %lb, %entry ], [ %i.next, %vec ]
  %p = getelementptr inbounds float, ptr %out, i64 %i
  store <8 x float> zeroinitializer, ptr %p, align 4, !nontemporal !0
  %i.next = add nsw i64 %i, 8
  %done = icmp sge i64 %i.next, %ub
  br i1 %done, label %exit, label %vec

exit:
  ret void
}

; The buffer is loaded after the entry writes memory: a clone would load it
; again and might see another pointer, so the function is left alone.
; CHECK-LABEL: define void @loaded_after_a_store(
; CHECK-NOT: aligned_streaming
; CHECK: ret void
define void @loaded_after_a_store(ptr %args) {
entry:
  store ptr null, ptr %args, align 8
  %slot = getelementptr inbounds i8, ptr %args, i64 8
  %out = load ptr, ptr %slot, align 8
  br label %vec

vec:
  %i = phi i64 [ 0, %entry ], [ %i.next, %vec ]
  %p = getelementptr inbounds float, ptr %out, i64 %i
  store <8 x float> zeroinitializer, ptr %p, align 4, !nontemporal !0
  %i.next = add nuw nsw i64 %i, 8
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %vec

exit:
  ret void
}

; A value-returning function with its buffer as an argument: the clone's
; result is returned.
; CHECK-LABEL: define i32 @returns(
; CHECK: aligned:
; CHECK-NEXT: %[[R:.*]] = musttail call i32 @returns.aligned_streaming(ptr %out)
; CHECK-NEXT: ret i32 %[[R]]
define i32 @returns(ptr %out) {
entry:
  br label %vec

vec:
  %i = phi i64 [ 0, %entry ], [ %i.next, %vec ]
  %p = getelementptr inbounds float, ptr %out, i64 %i
  store <8 x float> zeroinitializer, ptr %p, align 4, !nontemporal !0
  %i.next = add nuw nsw i64 %i, 8
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %vec

exit:
  ret i32 7
}

declare void @use(ptr)
declare void @llvm.assume(i1)

; CHECK-LABEL: define internal void @rows.aligned_streaming(
; CHECK: %out = load ptr, ptr %args
; CHECK-NEXT: call void @llvm.assume(i1 true) [ "align"(ptr %out, i64 32) ]
; CHECK: store <8 x float> zeroinitializer, ptr %{{.*}}, align 32, !nontemporal
; CHECK-LABEL: define internal void @flat_aligned_chunks.aligned_streaming(
; CHECK: store <8 x float> zeroinitializer, ptr %{{.*}}, align 32, !nontemporal
; CHECK-LABEL: define internal i32 @returns.aligned_streaming(
; CHECK: call void @llvm.assume(i1 true) [ "align"(ptr %out, i64 32) ]
; CHECK: store <8 x float> zeroinitializer, ptr %{{.*}}, align 32, !nontemporal
; CHECK: ret i32 7
; CHECK-NOT: aligned_streaming

!0 = !{i32 1}
