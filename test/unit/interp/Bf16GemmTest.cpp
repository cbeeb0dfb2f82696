// The bf16 GEMM (runtime/interp/gemm/Bf16Gemm.h) against a double reference
// loop, once per set of bf16 units this CPU has (AMX, AVX-512 BF16): edge
// shapes around the 32 x 32 block, the 16-row tiles and the 32-deep tile
// rows, the cache blocks, transposed and strided operands, accumulation, and
// C left alone outside its M x N window; the bf16 result (gemmBf16RoundedOut)
// against the f32 one rounded.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/Half.h"
#include "runtime/interp/gemm/Bf16MicroKernel.h"

namespace kiln::interp::gemm {
namespace {

constexpr float kSentinel = 12345.f;
constexpr uint16_t kSentinelBits = 0x7fc1;  // a NaN: a read of padding would show in C

/// A bf16 operand stored row-major (rs = cols + pad, cs = 1) or
/// column-major (rs = 1, cs = rows + pad); padding holds NaN.
struct Operand {
  std::vector<uint16_t> storage;
  int64_t rs, cs;
  Operand(int64_t r, int64_t c, bool transposed, int pad, std::mt19937& rng) {
    rs = transposed ? 1 : c + pad;
    cs = transposed ? r + pad : 1;
    storage.assign(static_cast<size_t>(std::max<int64_t>(1, transposed ? c * (r + pad) : r * (c + pad))),
                   kSentinelBits);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) storage[i * rs + j * cs] = core::floatToBf16(d(rng));
  }
  double at(int64_t i, int64_t j) const { return core::bf16ToFloat(storage[i * rs + j * cs]); }
  Bf16Matrix view() const { return {storage.data(), rs, cs}; }
};

struct Case {
  int64_t M, N, K;
  bool transA = false, transB = false;
  int pad = 0;
  bool accumulate = false, parallel = true;
};

std::string describe(const Case& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + (c.transA ? " A^T" : "") +
         (c.transB ? " B^T" : "") + " pad " + std::to_string(c.pad) + (c.accumulate ? " C+=" : " C=") +
         (c.parallel ? " parallel" : " serial");
}

/// Runs gemmBf16 and compares with a double loop over the exact products;
/// f32 sums in any order stay within 2 (K + 2) u sum |a b|.
void check(const Case& cs, uint32_t seed) {
  SCOPED_TRACE(describe(cs));
  std::mt19937 rng(seed);
  Operand a(cs.M, cs.K, cs.transA, cs.pad, rng), b(cs.K, cs.N, cs.transB, cs.pad, rng);
  const int64_t ldc = cs.N + cs.pad;
  std::vector<float> c(static_cast<size_t>((cs.M + 1) * ldc), kSentinel);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < cs.M; ++i)
    for (int64_t j = 0; j < cs.N; ++j) c[i * ldc + j] = d(rng);
  const std::vector<float> c0 = c;
  gemmBf16(cs.M, cs.N, cs.K, a.view(), b.view(), c.data(), ldc, cs.accumulate, cs.parallel);
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  for (int64_t i = 0; i < cs.M + 1; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (i >= cs.M || j >= cs.N) {
        if (got != kSentinel && bad++ < 5) ADD_FAILURE() << "C(" << i << "," << j << ") outside the window changed";
        continue;
      }
      double ref = cs.accumulate ? c0[i * ldc + j] : 0.0, mag = std::fabs(ref);
      for (int64_t k = 0; k < cs.K; ++k) {
        const double p = a.at(i, k) * b.at(k, j);
        ref += p;
        mag += std::fabs(p);
      }
      const double tol = 2.0 * static_cast<double>(cs.K + 2) * u * mag + 1e-30;
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << got << ", expected " << ref << " (tolerance " << tol << ")";
    }
  EXPECT_EQ(bad, 0);
}

class Bf16GemmTest : public ::testing::TestWithParam<Bf16Isa> {
 protected:
  void SetUp() override {
    if (!cpuSupportsBf16(GetParam())) GTEST_SKIP() << "this CPU cannot run " << bf16IsaName(GetParam());
    previous_ = setActiveBf16Isa(GetParam());
    ASSERT_EQ(activeBf16Isa(), GetParam());
  }
  void TearDown() override {
    if (cpuSupportsBf16(GetParam())) setActiveBf16Isa(previous_);
  }
  const Bf16MicroKernel& kernel() const {
    return GetParam() == Bf16Isa::amx ? amxBf16MicroKernel() : avx512Bf16MicroKernel();
  }

 private:
  Bf16Isa previous_ = Bf16Isa::none;
};

TEST_P(Bf16GemmTest, ThinAndDegenerateShapes) {
  uint32_t seed = 1;
  for (Case c : std::vector<Case>{{1, 1, 1}, {1, 37, 5}, {37, 1, 5}, {1, 1, 300}, {5, 7, 1}, {3, 2, 0}, {0, 4, 3},
                                  {4, 0, 3}, {1, 100, 1}, {100, 1, 1}})
    check(c, seed++);
  check({6, 9, 0, false, false, 1, true}, seed++);  // K = 0 accumulating leaves C as it was
}

TEST_P(Bf16GemmTest, EveryRowColumnAndDepthRemainderOfTheBlock) {
  uint32_t seed = 100;
  for (int m = 1; m <= kBf16BlockRows + 1; ++m) check({m, 37, 9}, seed++);      // rows of both A tiles
  for (int n = 1; n <= kBf16BlockCols + 1; ++n) check({35, n, 7}, seed++);      // columns of both B tiles
  for (int k = 1; k <= 2 * kBf16TileDepth + 1; ++k) check({19, 21, k}, seed++);  // depth pairs and tile rows
  check({3 * kBf16BlockRows - 1, 3 * kBf16BlockCols - 1, 3 * kBf16TileDepth - 1, false, false, 3, true}, seed++);
}

TEST_P(Bf16GemmTest, AcrossTheCacheBlocks) {
  const Bf16MicroKernel& k = kernel();
  uint32_t seed = 200;
  check({k.mc + 33, 2 * kBf16BlockCols + 3, 2 * k.kc + 5}, seed++);  // K past two blocks, M past the A block
  check({2 * k.mc + 3, 17, k.kc + 1, false, false, 0, true}, seed++);
  check({3, k.nc + 39, 40}, seed++);  // N past the B block
  check({k.mc + 5, k.nc + 3, k.kc + 9, false, false, 0, false, false}, seed++);
  check({45, 70, k.kc + 33, true, true, 2}, seed++);
}

TEST_P(Bf16GemmTest, TransposedAndStridedOperands) {
  uint32_t seed = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int pad : {0, 3}) {
        check({45, 70, 130, ta, tb, pad}, seed++);
        check({17, 33, 67, ta, tb, pad, true}, seed++);
        check({1, 65, 20, ta, tb, pad, false, false}, seed++);
      }
}

TEST_P(Bf16GemmTest, RowMajorAReadInPlace) {
  // A row-major A is read without packing where its rows fill 16-row tiles
  // and the depth whole tiles: whole blocks, a last block of other rows
  // (packed), padded rows (an odd row stride), several depth passes, and a
  // depth pass that is not whole tiles.
  const Bf16MicroKernel& k = kernel();
  uint32_t seed = 350;
  check({64, 70, 64}, seed++);
  check({48, 33, 96, false, false, 3}, seed++);
  check({96, 40, 2 * k.kc, false, true, 1, true}, seed++);
  check({2 * k.mc + 16, 50, 128, false, false, 0, false, false}, seed++);
  check({2 * k.mc + 21, 65, 160, false, false, 1}, seed++);
  check({80, 34, k.kc + 32}, seed++);
  check({32, 32, k.kc + 40, false, false, 0, true}, seed++);
}

TEST_P(Bf16GemmTest, SerialAndParallelAgreeBitForBit) {
  // The split over threads changes which thread computes a block, never the
  // order of its sums.
  std::mt19937 rng(400);
  const int64_t M = 150, N = 90, K = 520;
  Operand a(M, K, false, 0, rng), b(K, N, true, 1, rng);
  std::vector<float> serial(M * N), parallel(M * N);
  gemmBf16(M, N, K, a.view(), b.view(), serial.data(), N, false, false);
  gemmBf16(M, N, K, a.view(), b.view(), parallel.data(), N, false, true);
  EXPECT_EQ(serial, parallel);
}

TEST_P(Bf16GemmTest, ProductsOfBf16AreExactInTheSums) {
  // Small integers are exact in bf16 and so are their products and sums in
  // f32: the result must be exact, whatever the order.
  const int64_t M = 40, N = 50, K = 300;
  std::vector<uint16_t> a(M * K), b(K * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = core::floatToBf16(static_cast<float>(i % 7) - 3.f);
  for (int64_t i = 0; i < K * N; ++i) b[i] = core::floatToBf16(static_cast<float>(i % 5) - 2.f);
  std::vector<float> c(M * N);
  gemmBf16(M, N, K, {a.data(), K, 1}, {b.data(), N, 1}, c.data(), N, false, true);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += core::bf16ToFloat(a[i * K + k]) * static_cast<double>(core::bf16ToFloat(b[k * N + j]));
      ASSERT_EQ(c[i * N + j], ref) << "C(" << i << "," << j << ")";
    }
}

/// gemmBf16RoundedOut against gemmBf16 into f32 (same epilogue) rounded by
/// core::floatToBf16: equal bits, and C's bf16 padding left alone.
void checkRounded(const Case& cs, const Epilogue* e, uint32_t seed) {
  SCOPED_TRACE(describe(cs) + (e && e->bias ? " bias" : "") + (e && e->residual ? " residual" : "") +
               (e && e->relu ? " relu" : ""));
  std::mt19937 rng(seed);
  Operand a(cs.M, cs.K, cs.transA, cs.pad, rng), b(cs.K, cs.N, cs.transB, cs.pad, rng);
  const int64_t ldc = cs.N + cs.pad;
  std::vector<float> f32(static_cast<size_t>(std::max<int64_t>(1, cs.M * cs.N)));
  gemmBf16(cs.M, cs.N, cs.K, a.view(), b.view(), f32.data(), cs.N, false, cs.parallel, e);
  std::vector<uint16_t> c(static_cast<size_t>((cs.M + 1) * ldc), kSentinelBits);
  gemmBf16RoundedOut(cs.M, cs.N, cs.K, a.view(), b.view(), c.data(), ldc, cs.parallel, e);
  int64_t bad = 0;
  for (int64_t i = 0; i < cs.M + 1; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const bool inside = i < cs.M && j < cs.N;
      const uint16_t want = inside ? core::floatToBf16(f32[i * cs.N + j]) : kSentinelBits;
      if (c[i * ldc + j] != want && bad++ < 5)
        ADD_FAILURE() << "C(" << i << "," << j << ") = 0x" << std::hex << c[i * ldc + j] << ", expected 0x" << want
                      << std::dec << (inside ? "" : " (outside the window)");
    }
  EXPECT_EQ(bad, 0);
}

TEST_P(Bf16GemmTest, RoundedResultIsTheF32ResultRoundedBitForBit) {
  const Bf16MicroKernel& k = kernel();
  std::vector<float> bias(2 * (k.nc + 40));
  std::mt19937 rng(500);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  for (float& x : bias) x = d(rng);
  // A residual as wide as the widest case, its rows padded.
  const int64_t residualRs = k.nc + 45;
  std::vector<float> residual(static_cast<size_t>((2 * k.mc + 40) * residualRs));
  for (float& x : residual) x = 2.0f * d(rng);
  const Epilogue biasRelu{bias.data(), 1, true}, stridedBias{bias.data(), 2, false}, relu{nullptr, 1, true},
      biasResidualRelu{bias.data(), 1, true, residual.data(), residualRs};
  uint32_t seed = 510;
  for (const Epilogue* e : {static_cast<const Epilogue*>(nullptr), &biasRelu, &stridedBias, &relu, &biasResidualRelu}) {
    checkRounded({1, 1, 1}, e, seed++);
    checkRounded({33, 31, 9, false, false, 3}, e, seed++);  // edge blocks, padded rows of C
    checkRounded({k.mc + 33, 2 * kBf16BlockCols + 3, 130, true, true, 2}, e, seed++);
    checkRounded({70, k.nc + 39, 40}, e, seed++);                                 // past the B block
    checkRounded({45, 70, k.kc + 33, false, true, 1}, e, seed++);                 // two depth passes: via f32
    checkRounded({150, 90, 520, false, false, 0, false, false}, e, seed++);       // serial
    checkRounded({6, 9, 0}, e, seed++);                                           // no depth: the epilogue of 0
  }
}

TEST_P(Bf16GemmTest, RoundingTiesDenormalsInfinitiesAndNaN) {
  // A is zero, so C is the bias: the f32 values of the bias are rounded as
  // the cast rounds them (core::floatToBf16), NaN made quiet, not flushed.
  const float tie = 1.0f + std::ldexp(1.0f, -8);        // halfway: to even (1.0)
  const float tieUp = 1.0f + 3 * std::ldexp(1.0f, -8);  // halfway: to even (up)
  const std::vector<float> values{tie,
                                  tieUp,
                                  -tie,
                                  std::ldexp(1.0f, -140),  // a denormal
                                  -std::ldexp(3.0f, -135),
                                  3.3895e38f,  // rounds to infinity
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(),
                                  std::bit_cast<float>(0x7f800001u),  // signalling NaN
                                  -0.0f,
                                  1.0f / 3.0f};
  const int64_t M = 3, N = static_cast<int64_t>(values.size()), K = 2;
  std::vector<uint16_t> a(M * K, 0), b(K * N, core::floatToBf16(1.0f)), c(M * N);
  const Epilogue e{values.data(), 1, false};
  gemmBf16RoundedOut(M, N, K, {a.data(), K, 1}, {b.data(), N, 1}, c.data(), N, true, &e);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      // 0 + v: -0.0 + 0 is +0.0 in the GEMM's sum, as in any f32 one.
      const float sum = 0.0f + values[j];
      EXPECT_EQ(c[i * N + j], core::floatToBf16(sum)) << "C(" << i << "," << j << ") from " << values[j];
    }
}

INSTANTIATE_TEST_SUITE_P(Units, Bf16GemmTest, ::testing::Values(Bf16Isa::avx512bf16, Bf16Isa::amx),
                         [](const ::testing::TestParamInfo<Bf16Isa>& info) {
                           return std::string(bf16IsaName(info.param));
                         });

TEST(Bf16GemmIsa, DefaultIsTheBestTheCpuRunsOrTheEnvironmentsChoice) {
  const char* env = std::getenv("KILN_GEMM_BF16");
  const Bf16Isa best = cpuSupportsBf16(Bf16Isa::amx)          ? Bf16Isa::amx
                       : cpuSupportsBf16(Bf16Isa::avx512bf16) ? Bf16Isa::avx512bf16
                                                              : Bf16Isa::none;
  if (!env) EXPECT_EQ(activeBf16Isa(), best);
  const Bf16Isa before = setActiveBf16Isa(Bf16Isa::amx);
  EXPECT_EQ(activeBf16Isa(), cpuSupportsBf16(Bf16Isa::amx) ? Bf16Isa::amx
                             : cpuSupportsBf16(Bf16Isa::avx512bf16) ? Bf16Isa::avx512bf16
                                                                    : Bf16Isa::none);
  setActiveBf16Isa(Bf16Isa::none);
  EXPECT_EQ(activeBf16Isa(), Bf16Isa::none);
  setActiveBf16Isa(before);
}

}  // namespace
}  // namespace kiln::interp::gemm
