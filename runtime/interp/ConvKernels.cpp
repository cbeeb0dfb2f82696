// conv2d as an implicit GEMM on the packed GEMM (gemm/Sgemm.h): per image
// and group, the receptive fields are unfolded into a [C/groups*kH*kW,
// Ho*Wo] column matrix (im2col) and multiplied by the group's [C_out/groups,
// C/groups*kH*kW] weight rows, writing the output channels in place. A 1x1
// kernel with unit stride and no padding reads the input directly (no
// unfolding). f32 3x3 unit-stride convolutions over enough channels, and
// their weight gradients, run in Winograd's F(2x2, 3x3) domain instead
// (WinogradConv.h). The interpreter and the compiled kernels' runtime call
// (kiln_rt_conv2d_f32) both end here.
#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "runtime/interp/Dispatch.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/ScratchBuffer.h"
#include "runtime/interp/WinogradConv.h"
#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp {

namespace {

/// Below this many multiply-adds per (image, group) the images run in
/// parallel, each GEMM serial; above it each GEMM is split instead.
constexpr int64_t kParallelGemmWork = int64_t(1) << 22;
/// At most this many output positions and at least this many images: one
/// GEMM per position over all images (convolveByPosition).
constexpr int64_t kFewPositions = 16, kManyImages = 16;
/// Of those, f32 with dilation 1 and a kernel of at least this many taps:
/// convolveWideKernel.
constexpr int64_t kWideKernelTaps = 256;
/// convolveWideKernel sums its input channels in this many partial sums, run
/// in parallel: a fixed count, not the thread count, so that the order of
/// the sum (and so its bits) is the same on every machine.
constexpr int64_t kChannelChunks = 8;

/// The geometry of one conv2d call.
struct ConvGeometry {
  int64_t n, c, h, w;        // input
  int64_t co, kh, kw;        // weight [co, c/groups, kh, kw]
  int64_t ho, wo;            // output spatial extents
  core::Conv2dParams p;
  int64_t xs[4];             // input strides (elements)
  int64_t cg() const { return c / p.groups; }
  int64_t cog() const { return co / p.groups; }
  int64_t k() const { return cg() * kh * kw; }
  int64_t spatial() const { return ho * wo; }
  /// The same geometry for the Winograd kernels (one group, dilation 1).
  WinogradConv winograd() const {
    return {n, c, h, w, co, ho, wo, p.padTop, p.padLeft, {xs[0], xs[1], xs[2], xs[3]}};
  }
  /// Can the GEMM read the input directly as [C/groups, H*W]?
  bool direct() const {
    return kh == 1 && kw == 1 && p.strideH == 1 && p.strideW == 1 && p.padTop == 0 && p.padLeft == 0 &&
           p.padBottom == 0 && p.padRight == 0 && (h == 1 || xs[2] == w * xs[3]);
  }
};

/// The output positions [lo, hi) of one axis whose input index
/// o*stride + offset lies in [0, extent).
inline void validRange(int64_t offset, int64_t stride, int64_t extent, int64_t outs, int64_t* lo, int64_t* hi) {
  const int64_t l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = extent - 1 - offset;
  const int64_t h = last < 0 ? 0 : last / stride + 1;
  *lo = std::min(l, outs);
  *hi = std::max(*lo, std::min(h, outs));
}

/// dst[0, n): src[(k - lo) * step] for k in [lo, hi), zero elsewhere (one
/// run of an input row, with the padding on either side).
template <class T>
inline void copyPaddedRun(T* dst, int64_t lo, int64_t hi, int64_t n, const T* src, int64_t step) {
  if (n <= 16) {
    // Short runs (small images, weight gradients' 3x3 outputs): inline, not
    // three library calls of a few bytes each.
    for (int64_t k = 0; k < n; ++k) dst[k] = k >= lo && k < hi ? src[(k - lo) * step] : T(0);
    return;
  }
  std::fill(dst, dst + lo, T(0));
  if (step == 1) {
    std::copy(src, src + (hi - lo), dst + lo);
  } else {
    for (int64_t k = lo; k < hi; ++k, src += step) dst[k] = *src;
  }
  std::fill(dst + hi, dst + n, T(0));
}

/// Rows [r0, r1) of the column matrix of image `img`, group `g`: row
/// (c, i, j) holds x[img, g*cg + c, oh*sh + i*dh - pt, ow*sw + j*dw - pl]
/// over (oh, ow), zero outside the input.
template <class T>
void im2colRows(const ConvGeometry& G, const T* x, int64_t img, int64_t g, int64_t r0, int64_t r1, T* col) {
  const auto& p = G.p;
  const int64_t spatial = G.spatial();
  // (c, i, j) of row r, stepped rather than divided out per row.
  int64_t c = r0 / (G.kh * G.kw), i = (r0 / G.kw) % G.kh, j = r0 % G.kw;
  for (int64_t r = r0; r < r1; ++r, ++j) {
    if (j == G.kw) {
      j = 0;
      if (++i == G.kh) {
        i = 0;
        ++c;
      }
    }
    const T* plane = x + img * G.xs[0] + (g * G.cg() + c) * G.xs[1];
    T* row = col + r * spatial;
    int64_t wlo, whi;
    validRange(j * p.dilationW - p.padLeft, p.strideW, G.w, G.wo, &wlo, &whi);
    for (int64_t oh = 0; oh < G.ho; ++oh) {
      T* dst = row + oh * G.wo;
      const int64_t ih = oh * p.strideH + i * p.dilationH - p.padTop;
      if (ih < 0 || ih >= G.h) {
        std::fill(dst, dst + G.wo, T(0));
        continue;
      }
      const T* src = plane + ih * G.xs[2] + (wlo * p.strideW + j * p.dilationW - p.padLeft) * G.xs[3];
      copyPaddedRun(dst, wlo, whi, G.wo, src, p.strideW * G.xs[3]);
    }
  }
}

/// C[M, N] = A[M, K] * B[K, N]; C rows ldc apart. f32 runs the packed GEMM.
template <class T>
void matmulInto(int64_t M, int64_t N, int64_t K, const T* a, int64_t rsA, const T* b, int64_t rsB, int64_t csB, T* c,
          int64_t ldc, bool parallel) {
  if constexpr (std::is_same_v<T, float>) {
    gemm::sgemm(M, N, K, {a, rsA, 1}, {b, rsB, csB}, c, ldc, /*accumulate=*/false, parallel);
  } else {
    auto rows = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T* ci = c + i * ldc;
        std::fill(ci, ci + N, T(0));
        for (int64_t k = 0; k < K; ++k) {
          const T aik = a[i * rsA + k];
          const T* bk = b + k * rsB;
          for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j * csB];
        }
      }
    };
    if (parallel) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, M, 1),
                        [&](const tbb::blocked_range<int64_t>& r) { rows(r.begin(), r.end()); });
    } else {
      rows(0, M);
    }
  }
}

/// Few output positions, many images (conv2d's weight gradient: the output
/// is a kH x kW kernel, the "images" are input channels): one GEMM per
/// output position and group, [images, K] x [K, C_out/groups], whose rows
/// gather each image's receptive field at that position (runs along the
/// image's rows, copied whole). The weight is read in place as the
/// column-major [K, C_out/groups] operand. The image-major path would run
/// GEMMs only `spatial` columns wide.
template <class T>
void convolveByPosition(const ConvGeometry& G, const T* x, const T* wDense, T* out, int64_t outNs, int64_t outCs) {
  const auto& p = G.p;
  const int64_t K = G.k(), cog = G.cog(), n = G.n;
  thread_local ScratchSlot rowsSlot, productSlot;
  ScratchBuffer rowsBuffer(rowsSlot, sizeof(T) * n * K, "conv2d (receptive fields)");
  ScratchBuffer productBuffer(productSlot, sizeof(T) * n * cog, "conv2d (per-position product)");
  T* rows = rowsBuffer.as<T>();
  T* c = productBuffer.as<T>();
  for (int64_t g = 0; g < p.groups; ++g) {
    const T* wg = wDense + g * cog * K;
    for (int64_t oh = 0; oh < G.ho; ++oh) {
      for (int64_t ow = 0; ow < G.wo; ++ow) {
        // The receptive field's row (ch, i) is a run of kW inputs (dilation
        // apart), zero where it leaves the input.
        const int64_t colOffset = ow * p.strideW - p.padLeft;
        int64_t jlo, jhi;
        validRange(colOffset, p.dilationW, G.w, G.kw, &jlo, &jhi);
        const int64_t step = p.dilationW * G.xs[3];
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1), [&](const tbb::blocked_range<int64_t>& rg) {
          for (int64_t img = rg.begin(); img < rg.end(); ++img) {
            const T* base = x + img * G.xs[0] + g * G.cg() * G.xs[1];
            T* dst = rows + img * K;
            for (int64_t ch = 0; ch < G.cg(); ++ch) {
              for (int64_t i = 0; i < G.kh; ++i, dst += G.kw) {
                const int64_t ih = oh * p.strideH + i * p.dilationH - p.padTop;
                if (ih < 0 || ih >= G.h) {
                  std::fill(dst, dst + G.kw, T(0));
                  continue;
                }
                const T* src = base + ch * G.xs[1] + ih * G.xs[2] + (colOffset + jlo * p.dilationW) * G.xs[3];
                copyPaddedRun(dst, jlo, jhi, G.kw, src, step);
              }
            }
          }
        });
        // c [images, C_out/groups] = rows [images, K] x weight_g^T [K, C_out/groups].
        matmulInto<T>(n, cog, K, rows, K, wg, /*rsB=*/1, /*csB=*/K, c, cog, /*parallel=*/true);
        const int64_t at = oh * G.wo + ow;
        for (int64_t img = 0; img < n; ++img)
          for (int64_t co = 0; co < cog; ++co) out[img * outNs + (g * cog + co) * outCs + at] = c[img * cog + co];
      }
    }
  }
}

/// Few output positions, many images and a kernel nearly as large as the
/// input, dilation 1 (conv2d's weight gradient again: the kernel is the
/// output gradient's Ho x Wo plane). For each input channel and output
/// column the images' rows are copied once, shifted to that column and
/// zero-padded (1/C of the input: it stays in cache for every position);
/// each output position's receptive field is then one contiguous run of
/// kh*kw values in the copy, and one GEMM per position and channel,
/// [images, kh*kw] x [kh*kw, C_out/groups], reads the copy and the weight in
/// place, accumulating over channels. The channels are split into
/// kChannelChunks partial sums run in parallel, each with serial GEMMs (the
/// GEMMs are too small to split well). convolveByPosition would gather and pack a whole
/// [images, C*kh*kw] operand per position, from memory.
void convolveWideKernel(const ConvGeometry& G, const float* x, const float* wDense, float* out, int64_t outNs,
                        int64_t outCs) {
  const auto& p = G.p;
  const int64_t cg = G.cg(), cog = G.cog(), n = G.n, taps = G.kh * G.kw, spatial = G.spatial();
  const int64_t rows = G.h + p.padTop + p.padBottom;  // the copy's rows, padding included
  const int64_t plane = rows * G.kw;                   // one image's copy
  const int64_t productSize = spatial * n * cog;       // [position][image][C_out/groups]
  const int64_t chunks = std::min(cg, kChannelChunks);
  thread_local ScratchSlot productSlot;
  ScratchBuffer productBuffer(productSlot, sizeof(float) * chunks * productSize, "conv2d (per-position products)");
  float* products = productBuffer.as<float>();

  // Channels [c0, c1) of group g into `sum`; `parallel`: split each GEMM.
  auto channels = [&](int64_t g, int64_t c0, int64_t c1, float* sum, bool parallel) {
    thread_local ScratchSlot shiftedSlot;
    ScratchBuffer shiftedBuffer(shiftedSlot, sizeof(float) * n * plane, "conv2d (shifted input rows)");
    float* shifted = shiftedBuffer.as<float>();
    for (int64_t ch = c0; ch < c1; ++ch) {
      // B(k, co) = weight[g*cog + co, ch, k]: column-major, read in place.
      const float* wch = wDense + g * cog * G.k() + ch * taps;
      for (int64_t ow = 0; ow < G.wo; ++ow) {
        const int64_t colOffset = ow * p.strideW - p.padLeft;
        int64_t jlo, jhi;
        validRange(colOffset, 1, G.w, G.kw, &jlo, &jhi);
        for (int64_t img = 0; img < n; ++img) {
          const float* src = x + img * G.xs[0] + (g * cg + ch) * G.xs[1];
          float* dst = shifted + img * plane;
          for (int64_t r = 0; r < rows; ++r, dst += G.kw) {
            const int64_t ih = r - p.padTop;
            if (ih < 0 || ih >= G.h) {
              std::fill(dst, dst + G.kw, 0.0f);
              continue;
            }
            copyPaddedRun(dst, jlo, jhi, G.kw, src + ih * G.xs[2] + (colOffset + jlo) * G.xs[3], G.xs[3]);
          }
        }
        // Output row oh reads the copy's rows [oh*strideH, oh*strideH + kh).
        for (int64_t oh = 0; oh < G.ho; ++oh)
          gemm::sgemm(n, cog, taps, {shifted + oh * p.strideH * G.kw, plane, 1}, {wch, 1, G.k()},
                      sum + (oh * G.wo + ow) * n * cog, cog, /*accumulate=*/ch > c0, parallel);
      }
    }
  };
  for (int64_t g = 0; g < p.groups; ++g) {
    if (chunks == 1) {
      channels(g, 0, cg, products, /*parallel=*/true);
    } else {
      tbb::parallel_for(
          int64_t{0}, chunks,
          [&](int64_t t) { channels(g, cg * t / chunks, cg * (t + 1) / chunks, products + t * productSize, false); },
          tbb::static_partitioner());
      for (int64_t t = 1; t < chunks; ++t)
        for (int64_t i = 0; i < productSize; ++i) products[i] += products[t * productSize + i];
    }
    for (int64_t at = 0; at < spatial; ++at)
      for (int64_t img = 0; img < n; ++img)
        for (int64_t co = 0; co < cog; ++co)
          out[img * outNs + (g * cog + co) * outCs + at] = products[(at * n + img) * cog + co];
  }
}

/// out[img, co, oh, ow] (channels outCs apart, images outNs apart, each
/// channel's Ho*Wo contiguous) = conv2d(x, wDense [co, K]).
template <class T>
void convolve(const ConvGeometry& G, const T* x, const T* wDense, T* out, int64_t outNs, int64_t outCs) {
  const int64_t K = G.k(), spatial = G.spatial(), cog = G.cog(), groups = G.p.groups;
  const int64_t tasks = G.n * groups;
  if (tasks == 0 || spatial == 0 || cog == 0) return;
  if (K == 0) {  // no input channels: zeros
    for (int64_t img = 0; img < G.n; ++img)
      for (int64_t ch = 0; ch < G.co; ++ch) std::fill_n(out + img * outNs + ch * outCs, spatial, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    const auto& p = G.p;
    if (winogradFilterGradPays(G.n, G.co, G.kh, G.kw, p.strideH, p.strideW, p.dilationH, p.dilationW, p.groups,
                               G.ho, G.wo)) {
      conv2dWinogradFilterGrad(G.winograd(), G.kh, G.kw, x, wDense, out, outNs, outCs);
      return;
    }
  }
  if (spatial <= kFewPositions && G.n >= kManyImages) {
    if constexpr (std::is_same_v<T, float>) {
      if (G.p.dilationH == 1 && G.p.dilationW == 1 && G.kh * G.kw >= kWideKernelTaps) {
        convolveWideKernel(G, x, wDense, out, outNs, outCs);
        return;
      }
    }
    convolveByPosition(G, x, wDense, out, outNs, outCs);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    const auto& p = G.p;
    if (winogradPays(G.cg(), G.cog(), G.kh, G.kw, p.strideH, p.strideW, p.dilationH, p.dilationW, p.groups, G.ho,
                     G.wo)) {
      conv2dWinograd3x3(G.winograd(), x, wDense, out, outNs, outCs);
      return;
    }
  }
  const bool direct = G.direct();
  // The unfolded columns of one (image, group): the thread's kept scratch.
  thread_local ScratchSlot colSlot;
  auto one = [&](int64_t task, bool parallel) {
    const int64_t img = task / groups, g = task % groups;
    const T* a = wDense + g * cog * K;
    T* c = out + img * outNs + g * cog * outCs;
    if (direct) {
      const T* b = x + img * G.xs[0] + g * G.cg() * G.xs[1];
      matmulInto<T>(cog, spatial, K, a, K, b, G.xs[1], G.xs[3], c, outCs, parallel);
      return;
    }
    ScratchBuffer colBuffer(colSlot, sizeof(T) * K * spatial, "conv2d (unfolded columns)");
    T* col = colBuffer.as<T>();
    if (parallel) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, K, 1), [&](const tbb::blocked_range<int64_t>& r) {
        im2colRows(G, x, img, g, r.begin(), r.end(), col);
      });
    } else {
      im2colRows(G, x, img, g, 0, K, col);
    }
    matmulInto<T>(cog, spatial, K, a, K, col, spatial, 1, c, outCs, parallel);
  };
  if (cog * spatial * K >= kParallelGemmWork || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) one(t, true);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t t = r.begin(); t < r.end(); ++t) one(t, false);
  });
}

/// Whether the weight's [co, c/groups, kh, kw] elements lie densely in that order.
inline bool denseWeight(const int64_t* shape, const int64_t* strides) {
  return strides[3] == 1 && strides[2] == shape[3] && strides[1] == shape[2] * shape[3] &&
         strides[0] == shape[1] * shape[2] * shape[3];
}

/// Copies a strided weight into dense [co, c/groups*kh*kw] rows (conv2d's
/// weight gradient gets the output gradient as a permuted view), a whole
/// run at a time where its rows are contiguous.
template <class T>
void copyDenseWeight(const T* w, const int64_t* shape, const int64_t* strides, T* dst) {
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c, dst += shape[3])
        copyPaddedRun(dst, 0, shape[3], shape[3], w + a * strides[0] + b * strides[1] + c * strides[2], strides[3]);
}

template <class T>
void conv2dTyped(const T* x, const int64_t* xShape, const int64_t* xStrides, const T* w, const int64_t* wShape,
                 const int64_t* wStrides, const core::Conv2dParams& p, T* out, const int64_t* outShape,
                 const int64_t* outStrides) {
  ConvGeometry G{xShape[0], xShape[1], xShape[2], xShape[3], wShape[0], wShape[2], wShape[3],
                 outShape[2], outShape[3], p, {xStrides[0], xStrides[1], xStrides[2], xStrides[3]}};
  thread_local ScratchSlot weightSlot;
  std::optional<ScratchBuffer> weightCopy;
  const T* wd = w;
  if (!denseWeight(wShape, wStrides)) {
    weightCopy.emplace(weightSlot, sizeof(T) * wShape[0] * wShape[1] * wShape[2] * wShape[3], "conv2d (weight copy)");
    copyDenseWeight(w, wShape, wStrides, weightCopy->as<T>());
    wd = weightCopy->as<T>();
  }
  const bool channelsDense = outStrides[3] == 1 && (G.ho == 1 || outStrides[2] == G.wo);
  if (channelsDense) {
    convolve(G, x, wd, out, outStrides[0], outStrides[1]);
    return;
  }
  // An output whose channels are not dense: compute densely, then scatter.
  std::vector<T> tmp(static_cast<size_t>(G.n * G.co * G.spatial()));
  convolve(G, x, wd, tmp.data(), G.co * G.spatial(), G.spatial());
  size_t k = 0;
  for (int64_t a = 0; a < G.n; ++a)
    for (int64_t b = 0; b < G.co; ++b)
      for (int64_t c = 0; c < G.ho; ++c)
        for (int64_t d = 0; d < G.wo; ++d)
          out[a * outStrides[0] + b * outStrides[1] + c * outStrides[2] + d * outStrides[3]] = tmp[k++];
}

}  // namespace

void conv2dKernel(const Arg& x, const Arg& w, const core::Conv2dParams& p, const Shape& outShape, char* out) {
  int64_t xShape[4], wShape[4], oShape[4], oStrides[4];
  for (int d = 0; d < 4; ++d) {
    xShape[d] = x.shape[d];
    wShape[d] = w.shape[d];
    oShape[d] = outShape[d];
  }
  oStrides[3] = 1;
  for (int d = 2; d >= 0; --d) oStrides[d] = oStrides[d + 1] * oShape[d + 1];
  dispatchFloat(x.dtype, [&]<class T>() {
    conv2dTyped(reinterpret_cast<const T*>(x.data), xShape, x.strides, reinterpret_cast<const T*>(w.data), wShape,
                w.strides, p, reinterpret_cast<T*>(out), oShape, oStrides);
  });
}

void conv2dF32(const float* x, const int64_t* xShape, const int64_t* xStrides, const float* w, const int64_t* wShape,
               const int64_t* wStrides, const core::Conv2dParams& p, float* out, const int64_t* outShape,
               const int64_t* outStrides) {
  conv2dTyped(x, xShape, xStrides, w, wShape, wStrides, p, out, outShape, outStrides);
}

}  // namespace kiln::interp
