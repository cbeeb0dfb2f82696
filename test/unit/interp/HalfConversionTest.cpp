// HalfConversion's vectorised runs (F16C where the CPU has it) against the
// scalar conversions of runtime/core/Half.h, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/core/Half.h"
#include "runtime/interp/HalfConversion.h"

namespace kiln::interp {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(HalfConversion, NarrowingRoundsAsTheScalarConversions) {
  // Every 1021st f32 bit pattern (both signs, zeros, subnormals, the rounding
  // boundaries of every f16 exponent, overflow, infinities, NaNs with
  // payloads), in runs whose lengths leave remainders past the 8-wide steps.
  std::vector<float> x;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 1021) x.push_back(fromBits(static_cast<uint32_t>(u)));
  for (uint32_t u : {0x477fefffu, 0x477ff000u, 0x33000000u, 0x33000001u, 0x7fd00000u, 0xffa00000u})
    x.push_back(fromBits(u));  // around 65520, around 2^-25, NaN payloads
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> got(x.size());
    for (size_t at = 0, len = 1; at < x.size(); at += len, len = len % 37 + 1000)
      narrowHalfRun(t, x.data() + at, got.data() + at, static_cast<int64_t>(std::min(len, x.size() - at)));
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = t == DType::f16 ? core::floatToHalf(x[i]) : core::floatToBf16(x[i]);
      if (got[i] != want && bad++ < 5) {
        uint32_t u;
        std::memcpy(&u, &x[i], sizeof u);
        ADD_FAILURE() << dtype_name(t) << " of f32 0x" << std::hex << u << ": 0x" << got[i] << ", expected 0x" << want;
      }
    }
    EXPECT_EQ(bad, 0u) << dtype_name(t);
  }
}

TEST(HalfConversion, WideningIsExact) {
  // Every f16 and bf16 bit pattern, contiguous and strided: the scalar
  // conversion's value (a NaN may come out quiet).
  std::vector<uint16_t> h(2 * 65536);
  for (size_t i = 0; i < 65536; ++i) h[i] = h[65536 + i] = static_cast<uint16_t>(i);
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t stride : {1, 2}) {
      std::vector<float> out(65536);
      widenHalfRun(t, h.data(), stride, out.data(), 65536);
      for (size_t i = 0; i < out.size(); ++i) {
        const uint16_t v = h[i * static_cast<size_t>(stride)];
        const float want = t == DType::f16 ? core::halfToFloat(v) : core::bf16ToFloat(v);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(out[i])) << dtype_name(t) << " 0x" << std::hex << v;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &out[i], sizeof a);
        std::memcpy(&b, &want, sizeof b);
        ASSERT_EQ(a, b) << dtype_name(t) << " 0x" << std::hex << v << ", stride " << stride;
      }
    }
}

}  // namespace
}  // namespace kiln::interp
