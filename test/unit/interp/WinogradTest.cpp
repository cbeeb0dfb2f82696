// The Winograd F(2x2, 3x3) forward (runtime/interp/WinogradConv.h) against a
// double reference loop, taken a strip of tile rows at a time: one tile row,
// a few (the last strip short), the whole image and the L2-sized default,
// with one image (each strip split over the threads) and several (strips in
// parallel), odd output sizes, one-sided padding and a strided (NHWC) input.
// The strips only reorder independent tiles, so every strip size gives the
// same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/interp/WinogradConv.h"

namespace kiln::interp {
namespace {

struct Case {
  int64_t n, c, co, h, w;
  int64_t padTop, padLeft, padBottom, padRight;
  bool channelsLast = false;
};

std::string describe(const Case& k) {
  return std::to_string(k.n) + "x" + std::to_string(k.c) + "x" + std::to_string(k.h) + "x" + std::to_string(k.w) +
         " -> " + std::to_string(k.co) + " pad " + std::to_string(k.padTop) + "," + std::to_string(k.padLeft) + "," +
         std::to_string(k.padBottom) + "," + std::to_string(k.padRight) + (k.channelsLast ? " NHWC" : " NCHW");
}

/// The convolution of `k` with every strip size in `strips` (0: the
/// default), checked against double sums; all strip sizes agree bit for bit.
void check(const Case& k, std::initializer_list<int64_t> strips, uint32_t seed) {
  SCOPED_TRACE(describe(k));
  const int64_t ho = k.h + k.padTop + k.padBottom - 2, wo = k.w + k.padLeft + k.padRight - 2;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(k.n * k.c * k.h * k.w)), w(static_cast<size_t>(k.co * k.c * 9));
  for (float& v : x) v = d(rng);
  for (float& v : w) v = d(rng);
  // Element (img, ch, i, j) of x.
  const int64_t xs[4] = {k.c * k.h * k.w, k.channelsLast ? 1 : k.h * k.w, k.channelsLast ? k.w * k.c : k.w,
                         k.channelsLast ? k.c : 1};
  auto xAt = [&](int64_t img, int64_t ch, int64_t i, int64_t j) {
    if (i < 0 || i >= k.h || j < 0 || j >= k.w) return 0.0;
    return static_cast<double>(x[img * xs[0] + ch * xs[1] + i * xs[2] + j * xs[3]]);
  };
  std::vector<double> want(static_cast<size_t>(k.n * k.co * ho * wo)), bound(want.size());
  for (int64_t img = 0; img < k.n; ++img)
    for (int64_t o = 0; o < k.co; ++o)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double sum = 0, abs = 0;
          for (int64_t ch = 0; ch < k.c; ++ch)
            for (int64_t a = 0; a < 3; ++a)
              for (int64_t b = 0; b < 3; ++b) {
                const double p = xAt(img, ch, i + a - k.padTop, j + b - k.padLeft) * w[(o * k.c + ch) * 9 + a * 3 + b];
                sum += p;
                abs += std::fabs(p);
              }
          const size_t at = static_cast<size_t>(((img * k.co + o) * ho + i) * wo + j);
          want[at] = sum;
          bound[at] = abs;
        }

  std::vector<float> first;
  for (int64_t strip : strips) {
    SCOPED_TRACE("tile rows per strip " + std::to_string(strip));
    WinogradConv g{k.n, k.c, k.h, k.w, k.co, ho, wo, k.padTop, k.padLeft, {xs[0], xs[1], xs[2], xs[3]}, strip};
    std::vector<float> out(want.size(), std::nanf(""));
    conv2dWinograd3x3(g, x.data(), w.data(), out.data(), k.co * ho * wo, ho * wo);
    int bad = 0;
    for (size_t i = 0; i < out.size() && bad < 5; ++i) {
      // The transforms scale by up to 4 each way; f32 sums over 9 c terms.
      const double tol = 64 * 1.2e-7 * (bound[i] + 1e-30) * std::sqrt(static_cast<double>(9 * k.c));
      if (!(std::fabs(out[i] - want[i]) <= tol)) {
        ADD_FAILURE() << "output " << i << ": " << out[i] << ", want " << want[i] << " (tolerance " << tol << ")";
        ++bad;
      }
    }
    if (first.empty()) {
      first = out;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), out.data(), sizeof(float) * out.size()))
          << "the strip size changed the result's bits";
    }
  }
}

TEST(Winograd, StripsOfTileRowsGiveTheWholeImagesResult) {
  // 19 x 23 outputs: 10 tile rows of 12 tiles, the last row and column half
  // outside; strips of 1, 3 (the last one short), 4, the whole image.
  check({1, 16, 24, 19, 23, 1, 1, 1, 1}, {100, 1, 3, 4, 0}, 1);
  check({4, 24, 16, 19, 23, 1, 1, 1, 1}, {100, 1, 3, 4, 0}, 2);
  // One-sided and wide padding, an odd tile count per strip.
  check({3, 16, 16, 14, 9, 2, 0, 0, 3}, {100, 1, 2, 0}, 3);
  // A channels-last (strided) input.
  check({2, 16, 16, 12, 17, 1, 1, 1, 1, true}, {100, 2, 0}, 4);
}

TEST(Winograd, DefaultStripsOfAResNetLayer) {
  // ResNet's 64-channel 3x3 convolution at 56 x 56: the default strips
  // (a few tile rows within half of the L2) against the whole image.
  check({2, 64, 64, 56, 56, 1, 1, 1, 1}, {100, 0}, 5);
}

}  // namespace
}  // namespace kiln::interp
