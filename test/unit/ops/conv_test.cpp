// Convolution, pooling and batch normalization against double reference
// loops written from the ONNX definitions: random shapes with stride,
// padding (explicit and auto_pad), dilation, groups, bias, ceil_mode,
// count_include_pad, NCHW and NHWC, size-0 batches, every float dtype; and
// the errors bad arguments give.
#include "test/unit/ops/op_test_util.h"

#include "kiln/autograd.h"

namespace kt {
namespace {

using kiln::AutoPad;
using kiln::Conv2dOptions;
using kiln::Pool2dOptions;

/// ONNX Conv in double: x [N, C, H, W], w [Co, C/g, kh, kw], pads {t, l, b, r}.
Ref convRef(const Ref& x, const Ref& w, const Ref* bias, int64_t sh, int64_t sw, const int64_t pads[4], int64_t dh,
            int64_t dw, int64_t groups) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t co = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t ho = (h + pads[0] + pads[2] - (kh - 1) * dh - 1) / sh + 1;
  const int64_t wo = (wd + pads[1] + pads[3] - (kw - 1) * dw - 1) / sw + 1;
  Ref out({n, co, ho, wo});
  const int64_t cog = co / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double s = bias ? bias->v[o] : 0.0;
          const int64_t g = o / cog;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t y = i * sh + p * dh - pads[0], z = j * sw + q * dw - pads[1];
                if (y < 0 || y >= h || z < 0 || z >= wd) continue;
                s += x.at({b, g * cg + ci, y, z}) * w.at({o, ci, p, q});
              }
          out.at({b, o, i, j}) = s;
        }
  (void)c;
  return out;
}

/// NHWC <-> NCHW of a reference.
Ref toNhwc(const Ref& r) { return permuteRef(r, {0, 2, 3, 1}); }
Ref toNchw(const Ref& r) { return permuteRef(r, {0, 3, 1, 2}); }

/// Unit roundoff of a float dtype.
double unitRoundoff(DType t) {
  switch (t) {
    case DType::f64: return 0x1p-53;
    case DType::f32: return 0x1p-24;
    case DType::f16: return 0x1p-11;
    default: return 0x1p-8;
  }
}

/// Tolerance of a sum of `terms` products (each output), computed in f32
/// (f16/bf16 too) or f64, rounded once to t.
Tol convTol(DType t, int64_t terms) {
  Tol tol = tolFor(t);
  const double acc = (t == DType::f64 ? 1e-14 : 2e-6) * std::sqrt(static_cast<double>(terms + 1)) * 16;
  tol.atol += acc;
  tol.rtol += acc;
  return tol;
}

struct ConvCase {
  int64_t n, groups, cg, cog, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  bool bias;
};

ConvCase randomConv(Rng& rng) {
  for (;;) {
    ConvCase k;
    k.n = rng.coin(0.1) ? 0 : rng.randint(1, 3);
    k.groups = rng.coin(0.6) ? 1 : rng.randint(2, 3);
    k.cg = rng.randint(1, 3);
    k.cog = rng.randint(1, 3);
    k.h = rng.randint(1, 9);
    k.w = rng.randint(1, 9);
    k.kh = rng.randint(1, 3);
    k.kw = rng.randint(1, 3);
    k.sh = rng.randint(1, 3);
    k.sw = rng.randint(1, 3);
    k.dh = rng.coin(0.7) ? 1 : 2;
    k.dw = rng.coin(0.7) ? 1 : 2;
    for (auto& p : k.pads) p = rng.coin(0.5) ? 0 : rng.randint(1, 2);
    k.bias = rng.coin();
    if ((k.kh - 1) * k.dh + 1 <= k.h + k.pads[0] + k.pads[2] && (k.kw - 1) * k.dw + 1 <= k.w + k.pads[1] + k.pads[3])
      return k;
  }
}

void checkConvOnce(Rng& rng, DType t, const ConvCase& k, bool nhwc) {
  const int64_t c = k.groups * k.cg, co = k.groups * k.cog;
  Dims xs = nhwc ? Dims{k.n, k.h, k.w, c} : Dims{k.n, c, k.h, k.w};
  Input x = makeInput(rng, xs, t, smallRange(t));
  Input w = makeInput(rng, {co, k.cg, k.kh, k.kw}, t, smallRange(t));
  Input b = makeInput(rng, {co}, t, smallRange(t));
  Conv2dOptions o;
  o.stride = {k.sh, k.sw};
  o.dilation = {k.dh, k.dw};
  o.padding = {k.pads[0], k.pads[1], k.pads[2], k.pads[3]};
  o.groups = k.groups;
  o.layout = nhwc ? kiln::Layout::NHWC : kiln::Layout::NCHW;
  SCOPED_TRACE("conv2d(" + x.how + ", " + w.how + (k.bias ? ", bias" : "") + ", stride " + str({k.sh, k.sw}) +
               " pads " + str({k.pads[0], k.pads[1], k.pads[2], k.pads[3]}) + " dilation " + str({k.dh, k.dw}) +
               " groups " + std::to_string(k.groups) + (nhwc ? ", NHWC)" : ")"));
  Tensor y = kiln::conv2d(x.t, w.t, k.bias ? b.t : Tensor(), o);
  EXPECT_DTYPE(y, t);
  // The bias is a second op: the convolution's result is rounded to t first.
  Ref ref = convRef(nhwc ? toNchw(x.r) : x.r, w.r, nullptr, k.sh, k.sw, k.pads, k.dh, k.dw, k.groups);
  if (k.bias) {
    const int64_t per = ref.shape[2] * ref.shape[3];
    for (int64_t i = 0; i < ref.numel(); ++i)
      ref.v[i] = castTo(castTo(ref.v[i], t) + b.r.v[(i / per) % ref.shape[1]], t);
  }
  if (nhwc) ref = toNhwc(ref);
  EXPECT_TRUE(near(y, ref, convTol(t, k.cg * k.kh * k.kw)));
}

TEST(OpsConv, Conv2dRandomShapesEveryFloatDType) {
  Rng rng(kSeed + 300);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 40; ++it) checkConvOnce(rng, t, randomConv(rng), rng.coin(0.3));
}

TEST(OpsConv, Conv2dLargeShapesTakeTheParallelPaths) {
  Rng rng(kSeed + 301);
  // A big GEMM per image (split GEMM), many small images (images in
  // parallel), a 1x1 kernel read directly (NCHW and NHWC), a depthwise conv,
  // and, for f32 and f64, few output positions over many images (with a
  // kernel nearly as large as the input too).
  const ConvCase cases[] = {
      {2, 1, 32, 48, 20, 20, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true},
      {24, 1, 4, 8, 6, 7, 3, 3, 2, 1, 1, 1, {1, 0, 1, 0}, false},
      {3, 1, 16, 24, 9, 11, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true},
      {2, 16, 1, 1, 12, 12, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true},
      // Few output positions, many images: one GEMM per position (the
      // shape of a weight gradient).
      {20, 1, 3, 5, 4, 4, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, false},
      {18, 2, 2, 3, 5, 5, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, true},
      {16, 1, 4, 2, 9, 9, 3, 3, 1, 1, 3, 3, {0, 0, 0, 0}, false},
      // ... and a kernel nearly as large as the input (f32: the shifted-rows
      // GEMMs of convolveWideKernel).
      {16, 1, 3, 5, 16, 16, 16, 16, 1, 1, 1, 1, {1, 1, 1, 1}, false},
      {18, 2, 2, 3, 17, 16, 16, 16, 2, 1, 1, 1, {1, 0, 2, 1}, true},
  };
  for (DType t : {DType::f32, DType::f64})
    for (const ConvCase& k : cases) {
      checkConvOnce(rng, t, k, false);
      checkConvOnce(rng, t, k, true);
    }
}

/// Each case in f32, NCHW and NHWC.
template <std::size_t N>
void checkF32BothLayouts(Rng& rng, const ConvCase (&cases)[N]) {
  for (const ConvCase& k : cases) {
    checkConvOnce(rng, DType::f32, k, false);
    checkConvOnce(rng, DType::f32, k, true);
  }
}

TEST(OpsConv, Conv2dWinogradShapes) {
  Rng rng(kSeed + 303);
  // f32 3x3, unit stride, one group, at least 16 channels each way and 8x8
  // outputs: Winograd F(2x2, 3x3) (WinogradConv.h). Odd output sizes (the
  // last tile row and column half outside), no, one-sided, symmetric and
  // wide padding, one image (transforms and GEMMs split over threads),
  // three (one at a time), four (images in parallel); NHWC reads a strided
  // input.
  const ConvCase cases[] = {
      {1, 1, 16, 16, 8, 8, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, false},
      {3, 1, 17, 19, 11, 13, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, true},
      {4, 1, 24, 16, 9, 10, 3, 3, 1, 1, 1, 1, {1, 0, 2, 1}, false},
      {2, 1, 16, 32, 12, 12, 3, 3, 1, 1, 1, 1, {3, 2, 0, 4}, true},
      {2, 1, 16, 16, 1, 1, 3, 3, 1, 1, 1, 1, {5, 4, 4, 5}, false},
  };
  checkF32BothLayouts(rng, cases);
}

TEST(OpsConv, Conv2dWinogradFilterGradientShapes) {
  Rng rng(kSeed + 304);
  // The shape autograd gives a 3x3 unit-stride convolution's weight
  // gradient (input channels as images, the output gradient as a kh x kw
  // kernel, a 3x3 output): f32 with 16+ images and outputs runs in the
  // Winograd domain (conv2dWinogradFilterGrad). Odd kernel sizes (a half
  // tile), one channel and several (the channels' partial sums), kernels
  // taken in strips of tile rows.
  const ConvCase cases[] = {
      {16, 1, 3, 16, 9, 10, 9, 10, 1, 1, 1, 1, {1, 1, 1, 1}, false},
      {17, 1, 1, 18, 8, 8, 8, 8, 1, 1, 1, 1, {1, 1, 1, 1}, false},
      {16, 1, 9, 16, 12, 11, 10, 9, 1, 1, 1, 1, {0, 0, 0, 0}, false},
      // Kernels of more tile rows than one strip holds (two strips; the
      // last short, with a half tile row).
      {16, 1, 2, 16, 24, 24, 24, 24, 1, 1, 1, 1, {1, 1, 1, 1}, false},
      {16, 1, 2, 16, 25, 23, 25, 23, 1, 1, 1, 1, {1, 1, 1, 1}, false},
  };
  checkF32BothLayouts(rng, cases);
  // And through autograd: the weight gradient of a 3x3 convolution.
  Tensor x = kiln::rand({2, 16, 10, 10}, 5, DType::f32, -1, 1);
  Tensor w = kiln::rand({16, 16, 3, 3}, 6, DType::f32, -1, 1);
  w.requires_grad();
  Conv2dOptions o;
  o.padding = {1, 1, 1, 1};
  Tensor y = kiln::conv2d(x, w, Tensor(), o);
  Tensor gy = kiln::rand({2, 16, 10, 10}, 7, DType::f32, -1, 1);
  Tensor gw = kiln::grad(kiln::sum(y * gy), {w})[0];
  Tensor ref = kiln::conv2d(kiln::cast(x, DType::f64).permute({1, 0, 2, 3}),
                            kiln::cast(gy, DType::f64).permute({1, 0, 2, 3}), Tensor(), o)
                   .permute({1, 0, 2, 3});
  const double err = kiln::max(kiln::abs(kiln::cast(gw, DType::f64) - ref)).item<double>();
  const double scale = kiln::max(kiln::abs(ref)).item<double>();
  EXPECT_LT(err, 1e-5 * scale) << "largest error " << err << " of values up to " << scale;
}

TEST(OpsConv, Conv2dAutoPadAndPaddingForms) {
  Rng rng(kSeed + 302);
  Input x = makeInput(rng, {2, 3, 7, 8}, DType::f64, Layout::Contiguous);
  Input w = makeInput(rng, {4, 3, 3, 2}, DType::f64, Layout::Contiguous);
  // SAME_UPPER, stride 2: out = ceil(in/2); total pads h: (4-1)*2+3-7 = 2 ->
  // 1/1; w: (4-1)*2+2-8 = 0.
  Conv2dOptions o;
  o.stride = {2};
  o.auto_pad = AutoPad::SameUpper;
  int64_t upper[4] = {1, 0, 1, 0};
  EXPECT_TRUE(near(kiln::conv2d(x.t, w.t, {}, o), convRef(x.r, w.r, nullptr, 2, 2, upper, 1, 1, 1), tolFor(DType::f64)));
  // Stride 1, kernel 2 wide: one extra column, at the end (upper) or start.
  o.stride = {1};
  int64_t u1[4] = {1, 0, 1, 1}, l1[4] = {1, 1, 1, 0};
  EXPECT_TRUE(near(kiln::conv2d(x.t, w.t, {}, o), convRef(x.r, w.r, nullptr, 1, 1, u1, 1, 1, 1), tolFor(DType::f64)));
  o.auto_pad = AutoPad::SameLower;
  EXPECT_TRUE(near(kiln::conv2d(x.t, w.t, {}, o), convRef(x.r, w.r, nullptr, 1, 1, l1, 1, 1, 1), tolFor(DType::f64)));
  o.auto_pad = AutoPad::Valid;
  o.padding = {5};  // ignored with VALID
  int64_t none[4] = {0, 0, 0, 0};
  EXPECT_TRUE(near(kiln::conv2d(x.t, w.t, {}, o), convRef(x.r, w.r, nullptr, 1, 1, none, 1, 1, 1), tolFor(DType::f64)));
  // {h, w} pads both sides.
  Conv2dOptions p;
  p.padding = {2, 1};
  int64_t hw[4] = {2, 1, 2, 1};
  EXPECT_TRUE(near(kiln::conv2d(x.t, w.t, {}, p), convRef(x.r, w.r, nullptr, 1, 1, hw, 1, 1, 1), tolFor(DType::f64)));
}

TEST(OpsConv, Conv2dPromotesToTheFloatingDType) {
  Tensor x = kiln::ones({1, 1, 3, 3}, DType::f32), w = kiln::ones({1, 1, 2, 2}, DType::f64);
  Tensor y = kiln::conv2d(x, w);
  EXPECT_DTYPE(y, DType::f64);
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(4, 4.0));
}

TEST(OpsConv, Conv2dErrorsNameTheOpAndTheShapes) {
  Tensor x = kiln::ones({2, 6, 5, 5}), w = kiln::ones({4, 3, 3, 3});
  Conv2dOptions g2;
  g2.groups = 2;
  EXPECT_NO_THROW(kiln::conv2d(x, w, {}, g2));
  expectKilnError([&] { return kiln::conv2d(kiln::ones({6, 5, 5}), w); }, "conv2d");           // rank
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 3, 3})); }, "conv2d");           // weight rank
  expectKilnError([&] { return kiln::conv2d(x, w); }, "conv2d");                                // C != C/g * g
  Conv2dOptions g4;
  g4.groups = 4;
  expectKilnError([&] { return kiln::conv2d(x, w, {}, g4); }, "conv2d");  // 6 % 4
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 7, 3})); }, "conv2d");  // kernel > input
  Conv2dOptions big;
  big.dilation = {3};
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 3, 3}), {}, big); }, "conv2d");  // 7 > 5
  Conv2dOptions neg;
  neg.padding = {-1};
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 3, 3}), {}, neg); }, "conv2d");
  Conv2dOptions zero;
  zero.stride = {0};
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 3, 3}), {}, zero); }, "conv2d");
  Conv2dOptions three;
  three.padding = {1, 1, 1};
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 3, 3}), {}, three); }, "conv2d");
  expectKilnError([&] { return kiln::conv2d(x, kiln::ones({4, 6, 3, 3}), kiln::ones({3})); }, "conv2d");  // bias
  expectKilnError([&] { return kiln::conv2d(kiln::ones({2, 6, 5, 5}, DType::i32), kiln::ones({4, 6, 3, 3}, DType::i32)); },
                  "conv2d");
  try {
    kiln::conv2d(x, kiln::ones({4, 6, 7, 3}));
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 6, 5, 5]"), std::string::npos) << e.what();
  }
}

// ---- pooling ---------------------------------------------------------------------

/// Output extent of a pooling axis, from the ONNX definition (ceil_mode: a
/// window may not start in the end padding).
int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceilMode) {
  const double span = static_cast<double>((k - 1) * d + 1);
  const double q = (static_cast<double>(in + pb + pe) - span) / static_cast<double>(s);
  auto out = static_cast<int64_t>(ceilMode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceilMode && (out - 1) * s >= in + pb) --out;
  return out;
}

struct PoolCase {
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  bool ceil, includePad;
};

/// max (isMax) or average pooling of NCHW x in double.
/// `bound` (optional) receives, per output, the rounding error an average
/// recorded as kh*kw adds in dtype t may have: taps * u * sum|x| / count.
Ref poolRef(const Ref& x, const PoolCase& k, bool isMax, std::vector<double>* bound = nullptr, double u = 0) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t ho = poolOut(h, k.kh, k.sh, k.pads[0], k.pads[2], k.dh, k.ceil);
  const int64_t wo = poolOut(w, k.kw, k.sw, k.pads[1], k.pads[3], k.dw, k.ceil);
  Ref out({n, c, ho, wo});
  if (bound) bound->assign(static_cast<size_t>(out.numel()), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double m = -kInf, s = 0, count = 0, sumAbs = 0;
          bool nan = false;
          for (int64_t p = 0; p < k.kh; ++p)
            for (int64_t q = 0; q < k.kw; ++q) {
              const int64_t y = i * k.sh + p * k.dh - k.pads[0], z = j * k.sw + q * k.dw - k.pads[1];
              const bool inside = y >= 0 && y < h && z >= 0 && z < w;
              const bool inPadded = y >= -k.pads[0] && y < h + k.pads[2] && z >= -k.pads[1] && z < w + k.pads[3];
              if (k.includePad ? inPadded : inside) count += 1;
              if (!inside) continue;
              const double v = x.at({b, ch, y, z});
              nan = nan || std::isnan(v);
              m = std::max(m, v);
              s += v;
              sumAbs += std::fabs(v);
            }
          out.at({b, ch, i, j}) = isMax ? (nan ? kNaN : m) : s / count;
          if (bound) (*bound)[ravel({b, ch, i, j}, out.shape)] = (k.kh * k.kw + 1) * u * sumAbs / count;
        }
  return out;
}

PoolCase randomPool(Rng& rng, int64_t h, int64_t w, bool isMax) {
  for (;;) {
    PoolCase k;
    k.kh = rng.randint(1, 3);
    k.kw = rng.randint(1, 3);
    k.sh = rng.randint(1, 3);
    k.sw = rng.randint(1, 3);
    k.dh = isMax && rng.coin(0.3) ? 2 : 1;
    k.dw = isMax && rng.coin(0.3) ? 2 : 1;
    k.pads[0] = rng.coin() ? 0 : rng.randint(1, (k.kh - 1) * k.dh / 2 + 1);
    k.pads[1] = rng.coin() ? 0 : rng.randint(1, (k.kw - 1) * k.dw / 2 + 1);
    k.pads[2] = rng.coin() ? k.pads[0] : rng.randint(0, 1);
    k.pads[3] = rng.coin() ? k.pads[1] : rng.randint(0, 1);
    k.ceil = rng.coin();
    k.includePad = rng.coin();
    if ((k.kh - 1) * k.dh + 1 <= h + k.pads[0] + k.pads[2] && (k.kw - 1) * k.dw + 1 <= w + k.pads[1] + k.pads[3])
      return k;
  }
}

void checkPoolOnce(Rng& rng, DType t, bool isMax, bool nhwc) {
  Dims s{rng.coin(0.1) ? 0 : rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 8), rng.randint(1, 8)};
  PoolCase k = randomPool(rng, s[2], s[3], isMax);
  Input x = makeInput(rng, nhwc ? Dims{s[0], s[2], s[3], s[1]} : s, t, smallRange(t));
  if (isMax && !x.r.v.empty() && rng.coin(0.2)) {  // NaN propagates
    x.r.v[0] = kNaN;
    x.t = makeTensor(x.r, t);
    x.how = "with NaN " + x.how;
  }
  Pool2dOptions o;
  o.kernel = {k.kh, k.kw};
  o.stride = {k.sh, k.sw};
  o.dilation = {k.dh, k.dw};
  o.padding = {k.pads[0], k.pads[1], k.pads[2], k.pads[3]};
  o.ceil_mode = k.ceil;
  o.count_include_pad = k.includePad;
  o.layout = nhwc ? kiln::Layout::NHWC : kiln::Layout::NCHW;
  SCOPED_TRACE(std::string(isMax ? "max_pool2d(" : "avg_pool2d(") + x.how + ", kernel " + str({k.kh, k.kw}) +
               " stride " + str({k.sh, k.sw}) + " dilation " + str({k.dh, k.dw}) + " pads " +
               str({k.pads[0], k.pads[1], k.pads[2], k.pads[3]}) + (k.ceil ? " ceil" : "") +
               (k.includePad ? " count_include_pad" : "") + (nhwc ? " NHWC)" : ")"));
  Tensor y = isMax ? kiln::max_pool2d(x.t, o) : kiln::avg_pool2d(x.t, o);
  EXPECT_DTYPE(y, t);
  std::vector<double> bound;
  Ref ref = poolRef(nhwc ? toNchw(x.r) : x.r, k, isMax, &bound, unitRoundoff(t));
  if (nhwc) {
    ref = toNhwc(ref);
    Ref nb({s[0], s[1], ref.shape[1], ref.shape[2]}, bound);
    bound = toNhwc(nb).v;
  }
  EXPECT_TRUE(near(y, ref, tolFor(t), &bound));
}

TEST(OpsConv, MaxPool2dRandomShapesEveryFloatDType) {
  Rng rng(kSeed + 310);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 30; ++it) checkPoolOnce(rng, t, true, rng.coin(0.3));
}

TEST(OpsConv, AvgPool2dRandomShapesEveryFloatDType) {
  Rng rng(kSeed + 311);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 30; ++it) checkPoolOnce(rng, t, false, rng.coin(0.3));
}

TEST(OpsConv, PoolCeilModeDropsAWindowStartingInTheEndPadding) {
  // in 5, kernel 2, stride 2, pad 1 both sides: floor((7-2)/2)+1 = 3, ceil
  // gives 4 but that window would start at 6 >= 5+1: dropped (torch and
  // ONNX opset 19).
  Pool2dOptions o;
  o.kernel = {2};
  o.stride = {2};
  o.padding = {1};
  o.ceil_mode = true;
  Tensor y = kiln::max_pool2d(kiln::ones({1, 1, 5, 5}), o);
  EXPECT_EQ(y.shape(), Shape({1, 1, 3, 3}));
  // in 5, kernel 2, stride 2, no padding: ceil gives 3 (the last window
  // holds one element), floor 2.
  o.padding = {0};
  EXPECT_EQ(kiln::max_pool2d(kiln::ones({1, 1, 5, 5}), o).shape(), Shape({1, 1, 3, 3}));
  Tensor avg = kiln::avg_pool2d(kiln::arange(0, 25, 1, DType::f64).reshape({1, 1, 5, 5}), o);
  // Last window of the first row: element (0, 4) and (1, 4): (4 + 9) / 2.
  EXPECT_DOUBLE_EQ(avg.to_vector<double>()[2], 6.5);
  o.ceil_mode = false;
  EXPECT_EQ(kiln::max_pool2d(kiln::ones({1, 1, 5, 5}), o).shape(), Shape({1, 1, 2, 2}));
}

TEST(OpsConv, PoolAutoPadSame) {
  Pool2dOptions o;
  o.kernel = {3};
  o.stride = {2};
  o.auto_pad = AutoPad::SameUpper;
  Tensor x = kiln::arange(0, 2 * 7 * 6, 1, DType::f64).reshape({1, 2, 7, 6});
  Tensor y = kiln::max_pool2d(x, o);
  EXPECT_EQ(y.shape(), Shape({1, 2, 4, 3}));
  // h: total (4-1)*2+3-7 = 2 -> 1/1; w: (3-1)*2+3-6 = 1 -> 0/1 (upper).
  PoolCase k{3, 3, 2, 2, 1, 1, {1, 0, 1, 1}, false, false};
  Ref xr({1, 2, 7, 6});
  for (int64_t i = 0; i < xr.numel(); ++i) xr.v[i] = static_cast<double>(i);
  EXPECT_TRUE(near(y, poolRef(xr, k, true), tolFor(DType::f64)));
  o.auto_pad = AutoPad::SameLower;
  PoolCase l{3, 3, 2, 2, 1, 1, {1, 1, 1, 0}, false, false};
  EXPECT_TRUE(near(kiln::avg_pool2d(x, o), poolRef(xr, l, false), tolFor(DType::f64)));
}

TEST(OpsConv, PoolErrorsNameTheOp) {
  Tensor x = kiln::ones({1, 2, 4, 4});
  Pool2dOptions none;
  expectKilnError([&] { return kiln::max_pool2d(x, none); }, "max_pool2d");  // no kernel
  Pool2dOptions big;
  big.kernel = {5};
  expectKilnError([&] { return kiln::max_pool2d(x, big); }, "max_pool2d");
  expectKilnError([&] { return kiln::avg_pool2d(x, big); }, "avg_pool2d");
  Pool2dOptions ok;
  ok.kernel = {2};
  expectKilnError([&] { return kiln::max_pool2d(kiln::ones({2, 4, 4}), ok); }, "max_pool2d");
  expectKilnError([&] { return kiln::avg_pool2d(kiln::ones({1, 2, 4, 4}, DType::i64), ok); }, "avg_pool2d");
  Pool2dOptions zero = ok;
  zero.stride = {0};
  expectKilnError([&] { return kiln::avg_pool2d(x, zero); }, "avg_pool2d");
  expectKilnError([&] { return kiln::adaptive_avg_pool2d(x, 0, 2); }, "adaptive_avg_pool2d");
  expectKilnError([&] { return kiln::adaptive_avg_pool2d(kiln::ones({4, 4}), 2, 2); }, "adaptive_avg_pool2d");
}

Ref adaptiveRef(const Ref& x, int64_t oh, int64_t ow) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  Ref out({n, c, oh, ow});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
          const int64_t w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
          double s = 0;
          for (int64_t y = h0; y < h1; ++y)
            for (int64_t z = w0; z < w1; ++z) s += x.at({b, ch, y, z});
          out.at({b, ch, i, j}) = s / static_cast<double>((h1 - h0) * (w1 - w0));
        }
  return out;
}

TEST(OpsConv, AdaptiveAvgPool2dEvenAndUnevenWindows) {
  Rng rng(kSeed + 320);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 12; ++it) {
      Dims s{rng.randint(0, 2), rng.randint(1, 3), rng.randint(1, 9), rng.randint(1, 9)};
      const int64_t oh = rng.randint(1, 4), ow = rng.randint(1, 4);
      const bool nhwc = rng.coin(0.3);
      Input x = makeInput(rng, nhwc ? Dims{s[0], s[2], s[3], s[1]} : s, t, smallRange(t));
      SCOPED_TRACE("adaptive_avg_pool2d(" + x.how + ", " + std::to_string(oh) + ", " + std::to_string(ow) + ")");
      Tensor y = kiln::adaptive_avg_pool2d(x.t, oh, ow, nhwc ? kiln::Layout::NHWC : kiln::Layout::NCHW);
      Ref ref = adaptiveRef(nhwc ? toNchw(x.r) : x.r, oh, ow);
      if (nhwc) ref = toNhwc(ref);
      // Two rounded means (rows, then columns): within 4u of the mean of |x|.
      double maxAbs = 0;
      for (double v : x.r.v) maxAbs = std::max(maxAbs, std::fabs(v));
      Tol tol = convTol(t, s[2] * s[3]);
      tol.atol += 4 * unitRoundoff(t) * maxAbs;
      EXPECT_TRUE(near(y, ref, tol));
    }
}

// ---- batch norm --------------------------------------------------------------------

TEST(OpsConv, BatchNormTrainingAndInference) {
  Rng rng(kSeed + 330);
  for (DType t : {DType::f32, DType::f64})
    for (int it = 0; it < 10; ++it) {
      const int rank = static_cast<int>(rng.randint(2, 4));
      Dims s = randomShape(rng, rank, rank, 4, 0.0, 200);
      const bool nhwc = rank == 4 && rng.coin(0.3);
      const int axis = nhwc ? rank - 1 : 1;
      const int64_t c = s[axis];
      Input x = makeInput(rng, s, t, smallRange(t));
      Input w = makeInput(rng, {c}, t, smallRange(t)), b = makeInput(rng, {c}, t, smallRange(t));
      Input rm = makeInput(rng, {c}, t, smallRange(t));
      Input rv = makeInput(rng, {c}, t, Range{0.5, 2});
      const bool training = rng.coin();
      const double momentum = 0.8, eps = 1e-3;
      SCOPED_TRACE("batch_norm(" + x.how + (training ? ", training" : ", inference") + (nhwc ? ", NHWC)" : ")"));
      kiln::BatchNormResult r = kiln::batch_norm(x.t, w.t, b.t, rm.t, rv.t, training, momentum, eps,
                                                 nhwc ? kiln::Layout::NHWC : kiln::Layout::NCHW);
      // Reference: per channel statistics over every other axis.
      std::vector<double> mean(c, 0.0), var(c, 0.0), count(c, 0.0);
      for (int64_t i = 0; i < x.r.numel(); ++i) {
        const int64_t ch = unravel(i, s)[axis];
        mean[ch] += x.r.v[i];
        count[ch] += 1;
      }
      for (int64_t ch = 0; ch < c; ++ch) mean[ch] /= count[ch];
      for (int64_t i = 0; i < x.r.numel(); ++i) {
        const int64_t ch = unravel(i, s)[axis];
        var[ch] += (x.r.v[i] - mean[ch]) * (x.r.v[i] - mean[ch]);
      }
      for (int64_t ch = 0; ch < c; ++ch) var[ch] /= count[ch];
      Ref y(s);
      for (int64_t i = 0; i < x.r.numel(); ++i) {
        const int64_t ch = unravel(i, s)[axis];
        const double m = training ? mean[ch] : rm.r.v[ch], v = training ? var[ch] : rv.r.v[ch];
        y.v[i] = (x.r.v[i] - m) / std::sqrt(v + eps) * w.r.v[ch] + b.r.v[ch];
      }
      EXPECT_TRUE(near(r.y, y, compositeTolFor(t)));
      if (training) {
        Ref nm({c}), nv({c});
        for (int64_t ch = 0; ch < c; ++ch) {
          nm.v[ch] = rm.r.v[ch] * momentum + mean[ch] * (1 - momentum);
          nv.v[ch] = rv.r.v[ch] * momentum + var[ch] * (1 - momentum);
        }
        EXPECT_TRUE(near(r.running_mean, nm, compositeTolFor(t)));
        EXPECT_TRUE(near(r.running_var, nv, compositeTolFor(t)));
      } else {
        EXPECT_FALSE(r.running_mean.defined());
      }
    }
}

TEST(OpsConv, BatchNormErrorsNameTheOp) {
  Tensor x = kiln::ones({2, 3, 4, 4});
  expectKilnError([&] { return kiln::batch_norm(x, kiln::ones({4}), {}, {}, {}, true).y; }, "batch_norm");
  expectKilnError([&] { return kiln::batch_norm(x, {}, {}, {}, {}, false).y; }, "batch_norm");  // no stats
  expectKilnError([&] { return kiln::batch_norm(kiln::ones({3}), {}, {}, {}, {}, true).y; }, "batch_norm");
  expectKilnError([&] { return kiln::batch_norm(x, {}, {}, kiln::zeros({3}), {}, true).y; }, "batch_norm");
}

}  // namespace
}  // namespace kt
