// VectorMath: the interpreter's f32 exp, log, tanh, sigmoid and erf over
// arrays, in loops the compiler vectorises for the CPU the library runs on
// (AVX-512, AVX2 or the baseline, picked at load time). glibc's scalar
// tanhf (with the expm1f it calls) took 11 % of the interpreted transformer
// step, for its GELU; these take a few vector operations per 16 elements.
//
// Every function computes each element on its own and rounds every
// operation (no contraction), so an element's result does not depend on
// its neighbours, its layout or the ISA the loop ran on. Accuracy against
// the exact value: exp within 2 ulp (denormal results as well, overflow to
// +inf above 88.72, 0 below -103.98), log within 2, sigmoid within 4, tanh
// and erf within 7 (test/unit/interp/VectorMathTest.cpp measures each); NaN
// gives NaN.
#pragma once

#include <cstdint>

namespace kiln::interp {

void expF32(const float* x, float* y, int64_t n);
void logF32(const float* x, float* y, int64_t n);
/// The rational approximation (degree 13/6 over [-7.9, 7.9], ±1 outside,
/// x itself below 0.0004) that Eigen, XLA and MLIR's polynomial
/// approximation use, and so Kiln's compiled tanh.
void tanhF32(const float* x, float* y, int64_t n);
/// 1 / (1 + exp(-x)) as e / (1 + e) below 0, e = exp(-|x|), so that it
/// never overflows (the formula the scalar interpreter and compiled code use).
void sigmoidF32(const float* x, float* y, int64_t n);
/// The rational approximation (degree 13/8 over [-4, 4], ±1 outside) of
/// Eigen and XLA; 2x/sqrt(pi) near 0.
void erfF32(const float* x, float* y, int64_t n);

}  // namespace kiln::interp
