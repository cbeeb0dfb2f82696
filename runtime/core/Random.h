// Kiln's counter-based random numbers. Element i of a random tensor depends
// only on (seed, i), so the interpreter, compiled kernels and any thread
// count produce the same bits. The compiler lowers RandUniform/RandNormal to
// exactly these integer operations (and, for normals, the same libm calls in
// f64), so tiers agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln::core {

/// SplitMix64 finalizer over seed and counter: a bijective 64-bit mix.
inline uint64_t randomBits(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1) with 24 random bits: exact in f32 and f64.
inline double uniformAt(uint64_t seed, uint64_t i) {
  return static_cast<double>(randomBits(seed, i) >> 40) * 0x1.0p-24;
}

/// Standard normal by Box-Muller over counters 2i and 2i+1, computed in f64
/// with libm's log, sqrt and cos.
inline double normalAt(uint64_t seed, uint64_t i) {
  double u1 = static_cast<double>((randomBits(seed, 2 * i) >> 40) + 1) * 0x1.0p-24;  // (0, 1]
  double u2 = static_cast<double>(randomBits(seed, 2 * i + 1) >> 40) * 0x1.0p-24;    // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace kiln::core
