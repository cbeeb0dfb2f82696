// VectorMath's functions compiled again, each copy for one ISA only
// (VectorMathIsa.cpp, built twice: AVX2 and the x86-64 baseline), so that a
// test can check that every clone of the library gives the same bits,
// whichever one the machine it runs on picks.
#pragma once

#include <cstdint>

#include "runtime/interp/VectorMath.h"

namespace kiln::interp {

struct VectorMathCopy {
  const char* isa;
  using Unary = void (*)(const float*, float*, int64_t);
  Unary exp, log, tanh, sigmoid, erf, log2, log1p, expm1, atan, sin, cos;
  void (*exact)(ExactF32, const float*, float*, int64_t);
  void (*arith)(ArithF32, const float*, int64_t, const float*, int64_t, float*, int64_t);
  void (*productThenAdd)(const float*, const float*, const float*, float, float, float*, int64_t);
};

extern const VectorMathCopy kVectorMathAvx2;
extern const VectorMathCopy kVectorMathBaseline;

}  // namespace kiln::interp
