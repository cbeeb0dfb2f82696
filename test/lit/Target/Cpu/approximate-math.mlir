// RUN: kiln-opt %s -kiln-cpu-approximate-math -cse -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-cpu-approximate-math=scalef=true -cse -split-input-file | FileCheck %s --check-prefix=SCALEF
// (-cse: the pass rewrites from the math operations only and leaves each
// expansion's constants where it made them; the pipeline's later
// canonicalize and cse merge them, as here.)

// f32 tanh and exp become polynomials in arith (no math op is left).
// CHECK-LABEL: func.func @f32
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: arith.mulf
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// Elsewhere exp scales by 2^(k/2), then 2^(k - k/2), each built from its
// bits ((e + 127) << 23), so a denormal result rounds once instead of
// flushing to 0 as upstream's clamp of k to [-127, 127] did.
// CHECK: %[[E:.*]] = arith.fptosi %{{.*}} : f32 to i32
// CHECK: %[[HALF:.*]] = arith.shrsi %[[E]], %{{.*}} : i32
// CHECK: %[[REST:.*]] = arith.subi %[[E]], %[[HALF]] : i32
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: %[[P1:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addi %[[REST]]
// CHECK: %[[F2:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.mulf %[[P1]], %[[F2]] : f32
// CHECK-NOT: -1.270000e+02
// CHECK: return
// With scalef (AVX-512), exp rounds x / ln 2 to k and scales its polynomial
// by 2^k with ldexp; upstream's clamp of k to [-127, 127] is not there.
// SCALEF-LABEL: func.func @f32
// SCALEF-NOT: math.exp
// SCALEF: math.roundeven
// SCALEF: %[[K:.*]] = arith.fptosi %{{.*}} : f32 to i32
// SCALEF: llvm.intr.ldexp(%{{.*}}, %[[K]]) : (f32, i32) -> f32
// SCALEF-NOT: -1.270000e+02
// SCALEF: return
func.func @f32(%x: f32) -> (f32, f32) {
  %t = math.tanh %x : f32
  %e = math.exp %x : f32
  return %t, %e : f32, f32
}

// -----

// f64 keeps its libm-accurate functions.
// CHECK-LABEL: func.func @f64
// CHECK: math.tanh %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
// SCALEF-LABEL: func.func @f64
// SCALEF: math.exp %{{.*}} : f64
func.func @f64(%x: f64) -> (f64, f64) {
  %t = math.tanh %x : f64
  %e = math.exp %x : f64
  return %t, %e : f64, f64
}

// -----

// tanh's and erf's p/q (over clamped inputs, q far from 0) may divide by a
// reciprocal estimate (arcp, ninf); the program's own division stays an IEEE
// division.
// CHECK-LABEL: func.func @divisions
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK: arith.divf %[[X]], %[[Y]] : f32
// CHECK: arith.divf {{.*}} fastmath<ninf,arcp,contract> : f32
// CHECK: arith.divf {{.*}} fastmath<ninf,arcp,contract> : f32
// CHECK-NOT: arith.divf
// CHECK: return
func.func @divisions(%x: f32, %y: f32) -> (f32, f32, f32) {
  %q = arith.divf %x, %y : f32
  %t = math.tanh %x : f32
  %e = math.erf %x : f32
  return %q, %t, %e : f32, f32, f32
}

// -----

// f32 erf is x * p(x^2) / q(x^2) over x clamped to [-4, 4] (unordered
// predicates: NaN passes), one rational on the whole range: no select picks
// coefficients per interval as upstream's expansion does.
// CHECK-LABEL: func.func @erf
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-DAG: %[[HI:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-DAG: %[[LO:.*]] = arith.constant -4.000000e+00 : f32
// CHECK: %[[NOT_ABOVE:.*]] = arith.cmpf ule, %[[X]], %[[HI]] : f32
// CHECK: %[[X1:.*]] = arith.select %[[NOT_ABOVE]], %[[X]], %[[HI]] : f32
// CHECK: %[[NOT_BELOW:.*]] = arith.cmpf uge, %[[X1]], %[[LO]] : f32
// CHECK: %[[X2:.*]] = arith.select %[[NOT_BELOW]], %[[X1]], %[[LO]] : f32
// CHECK: %[[SQ:.*]] = arith.mulf %[[X2]], %[[X2]] : f32
// CHECK-NOT: arith.select
// CHECK: %[[XP:.*]] = arith.mulf %[[X2]], %{{.*}} : f32
// CHECK: %[[R:.*]] = arith.divf %[[XP]], %{{.*}} fastmath<ninf,arcp,contract> : f32
// CHECK: return %[[R]]
func.func @erf(%x: f32) -> f32 {
  %e = math.erf %x : f32
  return %e : f32
}

// -----

// An exp marked kiln.nonpositive_operand (x <= 0 or NaN) has no upper clamp;
// without scalef, k comes from one fma with 1.5 * 2^23 + 151 (12583063), whose
// bits shifted left by 23 are 2^(k + 24); the polynomial's coefficients are
// scaled by 2^-24 (the last two are 1 * 2^-24 = 5.96046448E-8), so one product
// gives the result. With scalef it keeps ldexp, without the upper clamp.
// CHECK-LABEL: func.func @nonpositive
// CHECK-NOT: 8.880000e+01
// CHECK: %[[B:.*]] = math.fma %{{.*}}, %{{.*}}, %[[BIAS:.*]] : f32
// CHECK: %[[K:.*]] = arith.subf %[[B]], %[[BIAS]] : f32
// CHECK-NOT: math.roundeven
// CHECK: %[[ONE:.*]] = arith.constant 5.96046448E-8 : f32
// CHECK: %[[P5:.*]] = math.fma %{{.*}}, %{{.*}}, %[[ONE]] : f32
// CHECK-NEXT: %[[P6:.*]] = math.fma %[[P5]], %{{.*}}, %[[ONE]] : f32
// CHECK: %[[BITS:.*]] = arith.bitcast %[[B]] : f32 to i32
// CHECK: %[[SH:.*]] = arith.shli %[[BITS]], %{{.*}} : i32
// CHECK: %[[SCALE:.*]] = arith.bitcast %[[SH]] : i32 to f32
// CHECK: %[[R:.*]] = arith.mulf %[[P6]], %[[SCALE]] : f32
// CHECK-NOT: arith.fptosi
// CHECK: %[[OUT:.*]] = arith.select %{{.*}}, %{{.*}}, %[[R]] : f32
// CHECK: return %[[OUT]]
// SCALEF-LABEL: func.func @nonpositive
// SCALEF-NOT: 8.880000e+01
// SCALEF: math.roundeven
// SCALEF: llvm.intr.ldexp
// SCALEF: return
func.func @nonpositive(%x: f32) -> f32 {
  %e = math.exp %x {kiln.nonpositive_operand} : f32
  return %e : f32
}

// -----

// Below -104 (where exp is 0 in f32) a lane computes exp(0) and takes 0 at
// the end, so no lane's result underflows (an underflow costs a microcode
// assist on Intel cores: softmax rows masked with -1e9). The test is ordered:
// NaN computes on and comes out NaN.
// CHECK-LABEL: func.func @underflow
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[LOW:.*]] = arith.constant -1.040000e+02 : f32
// CHECK: %[[UNDER:.*]] = arith.cmpf olt, %[[X]], %[[LOW]] : f32
// CHECK: arith.select %[[UNDER]], %[[ZERO]], %[[X]] : f32
// CHECK-NOT: arith.cmpf uge
// CHECK: %[[OUT:.*]] = arith.select %[[UNDER]], %[[ZERO]], %{{.*}} : f32
// CHECK-NEXT: return %[[OUT]]
// SCALEF-LABEL: func.func @underflow
// SCALEF-SAME: (%[[X:.*]]: f32)
// SCALEF: %[[UNDER:.*]] = arith.cmpf olt, %[[X]], %{{.*}} : f32
// SCALEF: arith.select %[[UNDER]], %{{.*}}, %[[X]] : f32
// SCALEF: %[[E:.*]] = llvm.intr.ldexp
// SCALEF-NEXT: %[[OUT:.*]] = arith.select %[[UNDER]], %{{.*}}, %[[E]] : f32
// SCALEF-NEXT: return %[[OUT]]
func.func @underflow(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}
