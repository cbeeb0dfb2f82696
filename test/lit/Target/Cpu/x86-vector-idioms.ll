; RUN: opt -load-pass-plugin=%kiln_llvm_passes -passes='function(kiln-x86-vector-idioms)' -S %s | FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; maximum on zmm: vrange (max, sign from the compare: -0 < +0), and a + b
; where an operand is NaN.
; CHECK-LABEL: define <16 x float> @max16(
; CHECK: %[[R:.*]] = call <16 x float> @llvm.x86.avx512.mask.range.ps.512(<16 x float> %a, <16 x float> %b, i32 5, <16 x float> poison, i16 -1, i32 4)
; CHECK: %[[U:.*]] = fcmp uno <16 x float> %a, %b
; CHECK: %[[S:.*]] = fadd <16 x float> %a, %b
; CHECK: %m = select <16 x i1> %[[U]], <16 x float> %[[S]], <16 x float> %[[R]]
; CHECK-NOT: llvm.maximum
define <16 x float> @max16(<16 x float> %a, <16 x float> %b) #0 {
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %a, <16 x float> %b)
  ret <16 x float> %m
}

; minimum of f64 on ymm (AVX-512VL): the 256-bit form, an i8 mask and no
; rounding argument. With nnan, no NaN select.
; CHECK-LABEL: define <4 x double> @min4(
; CHECK: %m = call <4 x double> @llvm.x86.avx512.mask.range.pd.256(<4 x double> %a, <4 x double> %b, i32 4, <4 x double> poison, i8 -1)
; CHECK-NEXT: ret <4 x double> %m
define <4 x double> @min4(<4 x double> %a, <4 x double> %b) #0 {
  %m = call nnan <4 x double> @llvm.minimum.v4f64(<4 x double> %a, <4 x double> %b)
  ret <4 x double> %m
}

; f64 on zmm: eight lanes, so an i8 mask, and the rounding argument.
; CHECK-LABEL: define <8 x double> @max8d(
; CHECK: call <8 x double> @llvm.x86.avx512.mask.range.pd.512(<8 x double> %a, <8 x double> %b, i32 5, <8 x double> poison, i8 -1, i32 4)
; CHECK: fcmp uno <8 x double> %a, %b
define <8 x double> @max8d(<8 x double> %a, <8 x double> %b) #0 {
  %m = call <8 x double> @llvm.maximum.v8f64(<8 x double> %a, <8 x double> %b)
  ret <8 x double> %m
}

; ldexp(x, fptosi(roundeven(y))): vscalef(x, roundeven(y)).
; CHECK-LABEL: define <16 x float> @scale16(
; CHECK: %r = call <16 x float> @llvm.roundeven.v16f32(<16 x float> %y)
; CHECK-NEXT: %e = call <16 x float> @llvm.x86.avx512.mask.scalef.ps.512(<16 x float> %x, <16 x float> %r, <16 x float> poison, i16 -1, i32 4)
; CHECK-NEXT: ret <16 x float> %e
define <16 x float> @scale16(<16 x float> %x, <16 x float> %y) #0 {
  %r = call <16 x float> @llvm.roundeven.v16f32(<16 x float> %y)
  %n = fptosi <16 x float> %r to <16 x i32>
  %e = call <16 x float> @llvm.ldexp.v16f32.v16i32(<16 x float> %x, <16 x i32> %n)
  ret <16 x float> %e
}

; An exponent that is not a whole number by construction stays ldexp.
; CHECK-LABEL: define <16 x float> @scaleAny(
; CHECK: call <16 x float> @llvm.ldexp.v16f32.v16i32
define <16 x float> @scaleAny(<16 x float> %x, <16 x float> %y) #0 {
  %n = fptosi <16 x float> %y to <16 x i32>
  %e = call <16 x float> @llvm.ldexp.v16f32.v16i32(<16 x float> %x, <16 x i32> %n)
  ret <16 x float> %e
}

; Without AVX-512DQ (vrange) the maximum stays; without AVX-512VL the
; 256-bit ldexp stays too.
; CHECK-LABEL: define <8 x float> @avx2(
; CHECK: call <8 x float> @llvm.maximum.v8f32
; CHECK: call <8 x float> @llvm.ldexp.v8f32.v8i32
define <8 x float> @avx2(<8 x float> %a, <8 x float> %b) #1 {
  %m = call <8 x float> @llvm.maximum.v8f32(<8 x float> %a, <8 x float> %b)
  %r = call <8 x float> @llvm.roundeven.v8f32(<8 x float> %b)
  %n = fptosi <8 x float> %r to <8 x i32>
  %e = call <8 x float> @llvm.ldexp.v8f32.v8i32(<8 x float> %m, <8 x i32> %n)
  ret <8 x float> %e
}

; A loop's max reduction: vrange alone on the carried chain, a mask of the
; lanes that met no NaN (and-ed with each step's ordered compare), and NaN
; put back after the loop, where the exit's LCSSA phi is read.
; CHECK-LABEL: define <16 x float> @rowMax(
; CHECK: body:
; CHECK: %acc.ordered = phi <16 x i1> [ splat (i1 true), %entry ], [ %acc.ordered.next, %body ]
; CHECK: %m = call <16 x float> @llvm.x86.avx512.mask.range.ps.512(<16 x float> %acc, <16 x float> %x, i32 5, <16 x float> poison, i16 -1, i32 4)
; CHECK-NEXT: %[[O:.*]] = fcmp ord <16 x float> %x, %x
; CHECK-NEXT: %acc.ordered.next = and <16 x i1> %acc.ordered, %[[O]]
; CHECK-NOT: fadd
; CHECK: exit:
; CHECK-NEXT: %m.lcssa = phi <16 x float> [ %m, %body ]
; CHECK-NEXT: %[[F:.*]] = select <16 x i1> %acc.ordered.next, <16 x float> %m.lcssa, <16 x float> splat (float 0x7FF8000000000000)
; CHECK-NEXT: ret <16 x float> %[[F]]
define <16 x float> @rowMax(ptr %p) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]
  %acc = phi <16 x float> [ splat (float 0xFFF0000000000000), %entry ], [ %m, %body ]
  %q = getelementptr float, ptr %p, i64 %i
  %x = load <16 x float>, ptr %q, align 4
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %acc, <16 x float> %x)
  %i.next = add i64 %i, 16
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %body
exit:
  %m.lcssa = phi <16 x float> [ %m, %body ]
  ret <16 x float> %m.lcssa
}

; A min reduction whose start may be NaN (an argument): the mask starts as
; the start's ordered lanes; the use after the loop reads the step itself.
; CHECK-LABEL: define <8 x double> @rowMin(
; CHECK: %[[S:.*]] = fcmp ord <8 x double> %start, %start
; CHECK: %acc.ordered = phi <8 x i1> [ %[[S]], %entry ], [ %acc.ordered.next, %body ]
; CHECK: %m = call <8 x double> @llvm.x86.avx512.mask.range.pd.512(<8 x double> %acc, <8 x double> %x, i32 4,
; CHECK: exit:
; CHECK-NEXT: %m.fixed = select <8 x i1> %acc.ordered.next, <8 x double> %m, <8 x double> splat (double 0x7FF8000000000000)
; CHECK-NEXT: ret <8 x double> %m.fixed
define <8 x double> @rowMin(ptr %p, <8 x double> %start) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]
  %acc = phi <8 x double> [ %start, %entry ], [ %m, %body ]
  %q = getelementptr double, ptr %p, i64 %i
  %x = load <8 x double>, ptr %q, align 8
  %m = call <8 x double> @llvm.minimum.v8f64(<8 x double> %x, <8 x double> %acc)
  %i.next = add i64 %i, 8
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %body
exit:
  ret <8 x double> %m
}

; The accumulator read elsewhere in the loop is no reduction of this form:
; the step keeps its NaN select.
; CHECK-LABEL: define <16 x float> @accReadInLoop(
; CHECK: call <16 x float> @llvm.x86.avx512.mask.range.ps.512
; CHECK: fcmp uno <16 x float> %acc, %x
; CHECK-NOT: phi <16 x i1>
define <16 x float> @accReadInLoop(ptr %p) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]
  %acc = phi <16 x float> [ splat (float 0xFFF0000000000000), %entry ], [ %m, %body ]
  %q = getelementptr float, ptr %p, i64 %i
  %x = load <16 x float>, ptr %q, align 4
  store <16 x float> %acc, ptr %q, align 4
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %acc, <16 x float> %x)
  %i.next = add i64 %i, 16
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %body
exit:
  ret <16 x float> %m
}

; A loop that leaves by two edges of a switch into one block (its phi has
; two incoming values from the latch): no reduction form, the step keeps its
; NaN select.
; CHECK-LABEL: define <16 x float> @twoExitEdges(
; CHECK: fcmp uno <16 x float> %acc, %x
; CHECK-NOT: phi <16 x i1>
; CHECK: %m.lcssa = phi <16 x float> [ %m, %body ], [ %m, %body ]
define <16 x float> @twoExitEdges(ptr %p) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]
  %acc = phi <16 x float> [ splat (float 0xFFF0000000000000), %entry ], [ %m, %body ]
  %q = getelementptr float, ptr %p, i64 %i
  %x = load <16 x float>, ptr %q, align 4
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %acc, <16 x float> %x)
  %i.next = add i64 %i, 16
  %t = trunc i64 %i.next to i32
  switch i32 %t, label %body [
    i32 1024, label %exit
    i32 2048, label %exit
  ]
exit:
  %m.lcssa = phi <16 x float> [ %m, %body ], [ %m, %body ]
  ret <16 x float> %m.lcssa
}

; A reduction step marked nnan needs no NaN mask: vrange alone, no phi.
; CHECK-LABEL: define <16 x float> @rowMaxNoNaNs(
; CHECK: %m = call <16 x float> @llvm.x86.avx512.mask.range.ps.512(<16 x float> %acc, <16 x float> %x, i32 5,
; CHECK-NOT: phi <16 x i1>
; CHECK-NOT: select
; CHECK: ret <16 x float> %m
define <16 x float> @rowMaxNoNaNs(ptr %p) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %body ]
  %acc = phi <16 x float> [ splat (float 0xFFF0000000000000), %entry ], [ %m, %body ]
  %q = getelementptr float, ptr %p, i64 %i
  %x = load <16 x float>, ptr %q, align 4
  %m = call nnan <16 x float> @llvm.maximum.v16f32(<16 x float> %acc, <16 x float> %x)
  %i.next = add i64 %i, 16
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %body
exit:
  ret <16 x float> %m
}

; A loop that may also leave before its latch (a second exiting block): no
; single place after it, so the step keeps its NaN select.
; CHECK-LABEL: define <16 x float> @twoExitingBlocks(
; CHECK: fcmp uno <16 x float> %acc, %x
; CHECK-NOT: phi <16 x i1>
define <16 x float> @twoExitingBlocks(ptr %p, i64 %stop) #0 {
entry:
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %acc = phi <16 x float> [ splat (float 0xFFF0000000000000), %entry ], [ %m, %latch ]
  %q = getelementptr float, ptr %p, i64 %i
  %x = load <16 x float>, ptr %q, align 4
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %acc, <16 x float> %x)
  %early = icmp eq i64 %i, %stop
  br i1 %early, label %exit, label %latch
latch:
  %i.next = add i64 %i, 16
  %done = icmp eq i64 %i.next, 1024
  br i1 %done, label %exit, label %body
exit:
  %r = phi <16 x float> [ %m, %body ], [ %m, %latch ]
  ret <16 x float> %r
}

; The horizontal step: vrange of halves down to 128 bits, then of the
; upper live lanes within them, and NaN where any lane is NaN.
; CHECK-LABEL: define float @reduceMax(
; CHECK: %[[U:.*]] = fcmp uno <16 x float> %v, %v
; CHECK-NEXT: %[[ANY:.*]] = call i1 @llvm.vector.reduce.or.v16i1(<16 x i1> %[[U]])
; CHECK: call <8 x float> @llvm.x86.avx512.mask.range.ps.256(<8 x float> %{{.*}}, <8 x float> %{{.*}}, i32 5, <8 x float> poison, i8 -1)
; CHECK: call <4 x float> @llvm.x86.avx512.mask.range.ps.128(<4 x float> %{{.*}}, <4 x float> %{{.*}}, i32 5,
; CHECK: shufflevector <4 x float> %{{.*}}, <4 x float> poison, <4 x i32> <i32 2, i32 3, i32 2, i32 3>
; CHECK: shufflevector <4 x float> %{{.*}}, <4 x float> poison, <4 x i32> <i32 1, i32 1, i32 1, i32 1>
; CHECK: %[[L:.*]] = extractelement <4 x float> %{{.*}}, i64 0
; CHECK-NEXT: %r = select i1 %[[ANY]], float 0x7FF8000000000000, float %[[L]]
; CHECK-NOT: llvm.vector.reduce.fmaximum
define float @reduceMax(<16 x float> %v) #0 {
  %r = call float @llvm.vector.reduce.fmaximum.v16f32(<16 x float> %v)
  ret float %r
}

; f64 min of 4 lanes: one 256 -> 128 halving, then one in-register step.
; CHECK-LABEL: define double @reduceMin4(
; CHECK: call <2 x double> @llvm.x86.avx512.mask.range.pd.128(<2 x double> %{{.*}}, <2 x double> %{{.*}}, i32 4,
; CHECK: shufflevector <2 x double> %{{.*}}, <2 x double> poison, <2 x i32> <i32 1, i32 1>
; CHECK: select i1
define double @reduceMin4(<4 x double> %v) #0 {
  %r = call double @llvm.vector.reduce.fminimum.v4f64(<4 x double> %v)
  ret double %r
}

declare <16 x float> @llvm.maximum.v16f32(<16 x float>, <16 x float>)
declare <8 x double> @llvm.minimum.v8f64(<8 x double>, <8 x double>)
declare float @llvm.vector.reduce.fmaximum.v16f32(<16 x float>)
declare double @llvm.vector.reduce.fminimum.v4f64(<4 x double>)
declare <8 x double> @llvm.maximum.v8f64(<8 x double>, <8 x double>)
declare <4 x double> @llvm.minimum.v4f64(<4 x double>, <4 x double>)
declare <8 x float> @llvm.maximum.v8f32(<8 x float>, <8 x float>)
declare <16 x float> @llvm.roundeven.v16f32(<16 x float>)
declare <8 x float> @llvm.roundeven.v8f32(<8 x float>)
declare <16 x float> @llvm.ldexp.v16f32.v16i32(<16 x float>, <16 x i32>)
declare <8 x float> @llvm.ldexp.v8f32.v8i32(<8 x float>, <8 x i32>)

attributes #0 = { "target-features"="+avx512f,+avx512dq,+avx512vl" }
attributes #1 = { "target-features"="+avx2,+fma,-avx512f" }
