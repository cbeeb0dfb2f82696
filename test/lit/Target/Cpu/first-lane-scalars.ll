; RUN: opt -load-pass-plugin=%kiln_llvm_passes -passes='function(kiln-first-lane-scalars)' -S %s | FileCheck %s

; The vectoriser's widened induction, read only through lane 0 (a load's
; index, a prefetch's address): scalars beside it, built from the lanes 0
; of its start and its steps (here through the unrolled part's add), and
; the extracts gone. The vector adds stay for instcombine to drop.
; CHECK-LABEL: define void @prefetchAndLoad(
; CHECK: vector.body:
; CHECK-NEXT: %vec.ind.lane0 = phi i64 [ 0, %entry ], [ %vec.ind.next.lane0, %vector.body ]
; CHECK: %step.add.lane0 = add i64 %vec.ind.lane0, 16
; CHECK: %a.lane0 = add i64 %base, %vec.ind.lane0
; CHECK: %b.lane0 = add i64 %base, %step.add.lane0
; CHECK: %g.lane0 = getelementptr float, ptr %next, i64 %a.lane0
; CHECK: %h.lane0 = getelementptr float, ptr %next, i64 %b.lane0
; CHECK: call void @llvm.prefetch.p0(ptr %g.lane0, i32 0, i32 3, i32 1)
; CHECK: call void @llvm.prefetch.p0(ptr %h.lane0, i32 0, i32 3, i32 1)
; CHECK: %q = getelementptr inbounds float, ptr %row, i64 %a.lane0
; CHECK: %vec.ind.next.lane0 = add i64 %step.add.lane0, 16
; CHECK: icmp eq i64 %vec.ind.next.lane0, 1024
; CHECK-NOT: extractelement
define void @prefetchAndLoad(ptr %row, ptr %next, i64 %base, ptr %out) {
entry:
  %bi = insertelement <16 x i64> poison, i64 %base, i64 0
  %bs = shufflevector <16 x i64> %bi, <16 x i64> poison, <16 x i32> zeroinitializer
  br label %vector.body
vector.body:
  %vec.ind = phi <16 x i64> [ <i64 0, i64 1, i64 2, i64 3, i64 4, i64 5, i64 6, i64 7, i64 8, i64 9, i64 10, i64 11, i64 12, i64 13, i64 14, i64 15>, %entry ], [ %vec.ind.next, %vector.body ]
  %step.add = add <16 x i64> %vec.ind, splat (i64 16)
  %a = add <16 x i64> %bs, %vec.ind
  %b = add <16 x i64> %bs, %step.add
  %g = getelementptr float, ptr %next, <16 x i64> %a
  %h = getelementptr float, ptr %next, <16 x i64> %b
  %ga = extractelement <16 x ptr> %g, i64 0
  call void @llvm.prefetch.p0(ptr %ga, i32 0, i32 3, i32 1)
  %ha = extractelement <16 x ptr> %h, i64 0
  call void @llvm.prefetch.p0(ptr %ha, i32 0, i32 3, i32 1)
  %ia = extractelement <16 x i64> %a, i64 0
  %q = getelementptr inbounds float, ptr %row, i64 %ia
  %x = load <16 x float>, ptr %q, align 4
  %o = getelementptr inbounds float, ptr %out, i64 %ia
  store <16 x float> %x, ptr %o, align 4
  %vec.ind.next = add <16 x i64> %step.add, splat (i64 16)
  %n = extractelement <16 x i64> %vec.ind.next, i64 0
  %done = icmp eq i64 %n, 1024
  br i1 %done, label %exit, label %vector.body
exit:
  ret void
}

; Lane 0 of a vector that is not built from uniform values and inductions
; (a loaded vector) stays an extract, and so does a lane other than 0.
; CHECK-LABEL: define i64 @notFirstLaneForms(
; CHECK: %l = extractelement <4 x i64> %s, i64 0
; CHECK: %k = extractelement <4 x i64> %a, i64 1
define i64 @notFirstLaneForms(ptr %p, i64 %c) {
  %v = load <4 x i64>, ptr %p, align 8
  %ci = insertelement <4 x i64> poison, i64 %c, i64 0
  %cs = shufflevector <4 x i64> %ci, <4 x i64> poison, <4 x i32> zeroinitializer
  %s = add <4 x i64> %v, %cs
  %l = extractelement <4 x i64> %s, i64 0
  %a = add <4 x i64> %cs, <i64 0, i64 1, i64 2, i64 3>
  %k = extractelement <4 x i64> %a, i64 1
  %r = add i64 %l, %k
  ret i64 %r
}

; A phi whose back-edge value is no function of lanes 0 (a loaded vector)
; gets no scalar phi.
; CHECK-LABEL: define i64 @notRecurrence(
; CHECK-NOT: .lane0 = phi
; CHECK: extractelement <4 x i64> %acc, i64 0
define i64 @notRecurrence(ptr %p) {
entry:
  br label %body
body:
  %acc = phi <4 x i64> [ zeroinitializer, %entry ], [ %v, %body ]
  %v = load <4 x i64>, ptr %p, align 8
  %e = extractelement <4 x i64> %acc, i64 0
  %done = icmp eq i64 %e, 7
  br i1 %done, label %exit, label %body
exit:
  ret i64 %e
}

; A splat of an extract that is itself replaced: the lanes read its
; replacement (the decisions come first, the replacements after, through
; handles), and the phi's lane reads the lanes of both its incoming values.
; CHECK-LABEL: define i64 @splatOfReplacedExtract(
; CHECK: %vi.lane0 = phi i64 [ 0, %entry ], [ %next.lane0, %body ]
; CHECK: %ins = insertelement <4 x i64> poison, i64 %vi.lane0, i64 0
; CHECK: %next.lane0 = add i64 %vi.lane0, %vi.lane0
; CHECK: %w.lane0 = mul i64 %vi.lane0, 3
; CHECK: %s = add i64 %vi.lane0, %w.lane0
define i64 @splatOfReplacedExtract(ptr %p) {
entry:
  br label %body
body:
  %vi = phi <4 x i64> [ <i64 0, i64 1, i64 2, i64 3>, %entry ], [ %next, %body ]
  %e0 = extractelement <4 x i64> %vi, i64 0
  %e1 = extractelement <4 x i64> %vi, i64 0
  %ins = insertelement <4 x i64> poison, i64 %e1, i64 0
  %spl = shufflevector <4 x i64> %ins, <4 x i64> poison, <4 x i32> zeroinitializer
  %next = add <4 x i64> %vi, %spl
  %w = mul <4 x i64> %spl, splat (i64 3)
  %e2 = extractelement <4 x i64> %w, i64 0
  %s = add i64 %e0, %e2
  %c = icmp eq i64 %s, 100
  br i1 %c, label %exit, label %body
exit:
  ret i64 %s
}

; A recurrence whose start is a long chain of adds, through a second phi:
; decided once for all it reads, so no lane is left half built.
; CHECK-LABEL: define i64 @longStartChain(
; CHECK: %p.lane0 = phi i64 [ %c16.lane0, %entry ], [ %pn.lane0, %body ]
; CHECK: %q.lane0 = phi i64 [ 0, %entry ], [ %qn.lane0, %body ]
; CHECK: ret i64 %p.lane0
define i64 @longStartChain(i64 %a) {
entry:
  %ins = insertelement <4 x i64> poison, i64 %a, i64 0
  %s0 = shufflevector <4 x i64> %ins, <4 x i64> poison, <4 x i32> zeroinitializer
  %c1 = add <4 x i64> %s0, splat (i64 1)
  %c2 = add <4 x i64> %c1, splat (i64 1)
  %c3 = add <4 x i64> %c2, splat (i64 1)
  %c4 = add <4 x i64> %c3, splat (i64 1)
  %c5 = add <4 x i64> %c4, splat (i64 1)
  %c6 = add <4 x i64> %c5, splat (i64 1)
  %c7 = add <4 x i64> %c6, splat (i64 1)
  %c8 = add <4 x i64> %c7, splat (i64 1)
  %c9 = add <4 x i64> %c8, splat (i64 1)
  %c10 = add <4 x i64> %c9, splat (i64 1)
  %c11 = add <4 x i64> %c10, splat (i64 1)
  %c12 = add <4 x i64> %c11, splat (i64 1)
  %c13 = add <4 x i64> %c12, splat (i64 1)
  %c14 = add <4 x i64> %c13, splat (i64 1)
  %c15 = add <4 x i64> %c14, splat (i64 1)
  %c16 = add <4 x i64> %c15, splat (i64 1)
  br label %body
body:
  %p = phi <4 x i64> [ %c16, %entry ], [ %pn, %body ]
  %q = phi <4 x i64> [ zeroinitializer, %entry ], [ %qn, %body ]
  %pn = add <4 x i64> %q, splat (i64 1)
  %qn = add <4 x i64> %p, splat (i64 2)
  %e = extractelement <4 x i64> %p, i64 0
  %c = icmp eq i64 %e, 100
  br i1 %c, label %exit, label %body
exit:
  ret i64 %e
}

; A cycle of adds in unreachable code (valid IR): no lane, no recursion
; without end.
; CHECK-LABEL: define i64 @unreachableCycle(
; CHECK: %e = extractelement <4 x i64> %a, i64 0
define i64 @unreachableCycle() {
entry:
  ret i64 0
dead:
  %a = add <4 x i64> %b, splat (i64 1)
  %b = add <4 x i64> %a, splat (i64 1)
  %e = extractelement <4 x i64> %a, i64 0
  ret i64 %e
}

; An operand without a lane 0 (a loaded vector) beside one with: nothing is
; built for either.
; CHECK-LABEL: define i64 @halfComputable(
; CHECK-NOT: lane0
; CHECK: %l = extractelement <4 x i64> %s, i64 0
define i64 @halfComputable(ptr %p, i64 %c) {
  %v = load <4 x i64>, ptr %p, align 8
  %ci = insertelement <4 x i64> poison, i64 %c, i64 0
  %cs = shufflevector <4 x i64> %ci, <4 x i64> poison, <4 x i32> zeroinitializer
  %u = mul <4 x i64> %cs, <i64 3, i64 4, i64 5, i64 6>
  %s = add <4 x i64> %u, %v
  %l = extractelement <4 x i64> %s, i64 0
  ret i64 %l
}

declare void @llvm.prefetch.p0(ptr, i32, i32, i32)
