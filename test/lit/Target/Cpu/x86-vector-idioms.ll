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

declare <16 x float> @llvm.maximum.v16f32(<16 x float>, <16 x float>)
declare <8 x double> @llvm.maximum.v8f64(<8 x double>, <8 x double>)
declare <4 x double> @llvm.minimum.v4f64(<4 x double>, <4 x double>)
declare <8 x float> @llvm.maximum.v8f32(<8 x float>, <8 x float>)
declare <16 x float> @llvm.roundeven.v16f32(<16 x float>)
declare <8 x float> @llvm.roundeven.v8f32(<8 x float>)
declare <16 x float> @llvm.ldexp.v16f32.v16i32(<16 x float>, <16 x i32>)
declare <8 x float> @llvm.ldexp.v8f32.v8i32(<8 x float>, <8 x i32>)

attributes #0 = { "target-features"="+avx512f,+avx512dq,+avx512vl" }
attributes #1 = { "target-features"="+avx2,+fma,-avx512f" }
