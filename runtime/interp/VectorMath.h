// VectorMath: the interpreter's f32 exp, log, tanh, sigmoid and erf, log2,
// log1p, expm1, atan, sin and cos, its
// sqrt, rsqrt, reciprocal and rounding, and its f32 add, sub, mul, div and
// product-then-add, over arrays, in loops the
// compiler vectorises for the CPU the library runs on (AVX-512, AVX2 or the
// baseline, picked at load time). glibc's scalar tanhf (with the expm1f it
// calls) took 11 % of the interpreted transformer step, for its GELU; these
// take a few vector operations per 16 elements.
//
// Every function computes each element on its own and rounds every
// operation (no contraction), so an element's result does not depend on
// its neighbours, its layout or the ISA the loop ran on (but for sin and cos
// beyond 1e5, which are glibc's, whose sinf picks its own FMA variant). Accuracy against
// the exact value: exp within 2 ulp (denormal results as well, overflow to
// +inf above 88.72, 0 below -103.972, ln 2^-150), log and log2 within 2,
// atan, log1p and expm1 within 3, sigmoid within 4, tanh and erf within 7,
// sin and cos within 1 (test/unit/interp/VectorMathTest.cpp measures each);
// NaN gives NaN.
#pragma once

#include <cstdint>

namespace kiln::interp {

void expF32(const float* x, float* y, int64_t n);
void logF32(const float* x, float* y, int64_t n);
/// The rational approximation (degree 13/6 over [-7.9, 7.9], ±1 outside,
/// x itself below 0.0004) that Eigen, XLA and MLIR's polynomial
/// approximation use, and so Kiln's compiled tanh.
void tanhF32(const float* x, float* y, int64_t n);
/// 1 / (1 + exp(-x)), and e * (1 / (1 + e)) below 0, e = exp(-|x|), so that
/// it never overflows (the formula the scalar interpreter and compiled code use).
void sigmoidF32(const float* x, float* y, int64_t n);
/// The rational approximation (degree 13/8 over [-4, 4], ±1 outside) of
/// Eigen and XLA; 2x/sqrt(pi) near 0.
void erfF32(const float* x, float* y, int64_t n);
/// log2 from log's decomposition: within 2 ulp, exact at powers of two.
void log2F32(const float* x, float* y, int64_t n);
/// log1p and expm1 from log and exp, with the rounding of 1 + x (of e^x)
/// cancelled (Goldberg's and Kahan's formulas): within 3 ulp, near 0 too.
void log1pF32(const float* x, float* y, int64_t n);
void expm1F32(const float* x, float* y, int64_t n);
/// Cephes' atanf: the argument reduced to [0, tan(pi/8)], a degree-9 odd
/// polynomial; within 3 ulp.
void atanF32(const float* x, float* y, int64_t n);
/// sin and cos computed in double precision (a two-part pi/2 reduction and
/// Taylor series) and rounded once: within an ulp for |x| up to 1e5 (zeros
/// of sin included, where single-precision reduction loses the digits);
/// larger inputs, infinities and NaN get libm's sinf/cosf. y may be x.
void sinF32(const float* x, float* y, int64_t n);
void cosF32(const float* x, float* y, int64_t n);

// Correctly rounded ones (sqrt; rsqrt as 1 / sqrt, two roundings;
// reciprocal; floor, ceil and round, ties to even): the libm results, which
// the interpreter's generic loop computed one element at a time.
enum class ExactF32 : uint8_t { Sqrt, Rsqrt, Reciprocal, Floor, Ceil, Round };
void exactF32(ExactF32 op, const float* x, float* y, int64_t n);

// Arithmetic, which the library's baseline build (SSE2) ran 4 lanes wide:
// the same IEEE operations, so the same bits on every ISA.
enum class ArithF32 : uint8_t { Add, Sub, Mul, Div };
/// o[i] = x[i * sx] op y[i * sy], each stride 0 (broadcast) or 1.
void arithF32(ArithF32 op, const float* x, int64_t sx, const float* y, int64_t sy, float* o, int64_t n);
/// o[i] = pSign * (x[i] * y[i]) + cSign * z[i], the product rounded first
/// (signs ±1: x*y + z, x*y - z, z - x*y as the two ops give them).
void productThenAddF32(const float* x, const float* y, const float* z, float pSign, float cSign, float* o,
                       int64_t n);

}  // namespace kiln::interp
