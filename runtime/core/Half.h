// IEEE half and bfloat16 conversions (round to nearest even), used where
// f16/bf16 values are loaded into or stored from f32 computations.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln::core {

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf/nan
  if (exp == 0) {
    if (mant == 0) return bitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * 0x1.0p-24f;
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToHalf(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 : 0));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (absu < 0x38800000u) {
    // Subnormal or zero in half: round abs value to a multiple of 2^-24.
    float a = bitsToFloat(absu);
    float scaled = a * 0x1.0p24f;  // exact
    // Round half to even via the FPU's default rounding on the float->int path.
    uint32_t m = static_cast<uint32_t>(__builtin_nearbyintf(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absu & 0x7fffff;
  uint32_t exp = (absu >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into exp: correct
  return static_cast<uint16_t>(sign | h);
}

inline float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

/// Round to nearest even; a NaN stays NaN, quieted. Branch-free (a select)
/// so that loops of it vectorise.
inline uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quietNan : rounded);
}

}  // namespace kiln::core
