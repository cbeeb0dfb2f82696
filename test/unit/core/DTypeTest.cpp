#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/core/Half.h"

// libkiln's f32 -> bf16 under the compiler runtime's name, which compiled
// kernels call on CPUs without AVX512-BF16 (runtime/exec/KernelRuntime.cpp).
extern "C" _Float16 __truncsfbf2(float);

namespace kiln {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_FALSE(is_integral(DType::boolean));
}

TEST(DType, HalfConversionRoundsToNearestEven) {
  using namespace core;
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(70000.0f), 0x7c00);  // overflow to inf
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  // Every half value round-trips exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalf(f), h) << h;
  }
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
}

// Compiled kernels narrow through __truncsfbf2 where LLVM widened a bf16
// value; it must give the runtime's bits (round to nearest even, quiet NaN),
// returned in xmm0's low half as __bf16 is.
TEST(DType, KernelsBf16NarrowingGivesTheRuntimesBits) {
  auto narrowed = [](float f) {
    const _Float16 h = __truncsfbf2(f);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
  };
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.0f + std::ldexp(1.0f, -8),
                               1.0f + 3 * std::ldexp(1.0f, -8), std::ldexp(1.0f, -149), 6.06e-39f, 3.4e38f,
                               INFINITY, -INFINITY, NAN, -NAN};
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  for (float f : values) ASSERT_EQ(narrowed(f), core::floatToBf16(f)) << f;
}

TEST(DType, PromoteTypes) {
  EXPECT_EQ(promote_types(DType::i32, DType::i64), DType::i64);
  EXPECT_EQ(promote_types(DType::i8, DType::u8), DType::i32);
  EXPECT_EQ(promote_types(DType::boolean, DType::u8), DType::u8);
  EXPECT_EQ(promote_types(DType::i64, DType::f16), DType::f16);
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote_types(DType::f32, DType::f64), DType::f64);
}

TEST(Shape, RankLimitIsAnError) {
  Shape s;
  for (int i = 0; i < Shape::kMaxRank; ++i) s.push_back(1);
  EXPECT_THROW(s.push_back(1), Error);
  EXPECT_EQ((Shape{2, 3}).str(), "[2, 3]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ((Shape{4, 0}).numel(), 0);
}

}  // namespace
}  // namespace kiln
