// Winograd F(2x2, 3x3): Y = A^T [ (G g G^T) . (B^T d B) ] A per 4x4 input
// patch d (stride 2 over the padded input) and 3x3 filter g, with
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// The 16 elementwise products summed over input channels are 16 GEMMs
// M_k [co, tiles] = U_k [co, c] x V_k [c, tiles], taken a strip of tile rows
// at a time (stripTileRows) from the input transform through the GEMMs to
// the output transform. The input is split into even and odd columns (and
// rows) first, so that each transform is one flat loop over a plane
// (Tiles) that the compiler vectorises (ivdep: the loops' inputs and
// outputs never overlap, which it cannot prove).
#include "runtime/interp/WinogradConv.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>

#include "runtime/interp/ScratchBuffer.h"
#include "runtime/interp/VectorClones.h"
#include "runtime/interp/gemm/Sgemm.h"
#include "runtime/support/HostCaches.h"

namespace kiln::interp {

namespace {

constexpr int kTaps = 16;  // 4x4 transformed values per tile

/// Tiles of one image (or strip): th rows of tw, 2x2 outputs each. The
/// transformed planes keep one more tile per tile row (`stride()` apart; the
/// extra tile is zero), the same layout as the even and odd columns of the
/// padded input, so that each transform is one flat loop over a plane that
/// vectorises whole, rather than a loop per tile row: at 56x56 that was 28
/// floats, one AVX-512 vector and a scalar tail.
struct Tiles {
  int64_t th, tw;
  int64_t stride() const { return tw + 1; }
  int64_t count() const { return th * stride(); }
};

/// U[k][o][i] = (G g G^T)[k] for every filter g = w[o, i] (k = 4 r + s).
void transformFilters(const float* w, int64_t co, int64_t c, float* u) {
  const int64_t plane = co * c;
  for (int64_t o = 0; o < co; ++o)
    for (int64_t i = 0; i < c; ++i) {
      const float* g = w + (o * c + i) * 9;
      for (int r = 0; r < 4; ++r) {
        float t[3];  // row r of G g
        for (int j = 0; j < 3; ++j) {
          const float g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
          t[j] = r == 0 ? g0 : r == 1 ? 0.5f * (g0 + g1 + g2) : r == 2 ? 0.5f * (g0 - g1 + g2) : g2;
        }
        float* dst = u + (r * 4) * plane + o * c + i;
        dst[0] = t[0];
        dst[plane] = 0.5f * (t[0] + t[1] + t[2]);
        dst[2 * plane] = 0.5f * (t[0] - t[1] + t[2]);
        dst[3 * plane] = t[2];
      }
    }
}

/// Splits 2 half padded input rows of one channel, from padded row
/// `firstRow`, into even and odd columns: even[r][t] = x(firstRow + r -
/// padTop, 2t - padLeft), odd[r][t] = x(firstRow + r - padTop, 2t + 1 -
/// padLeft), zero outside the input; cols of each per row. Even rows r come
/// first (at r / 2), then odd ones (at half + r / 2): the rows a tile row's
/// transform pairs are then a whole plane apart.
KILN_VECTOR_CLONES
void splitColumns(const WinogradConv& g, const float* plane, int64_t firstRow, int64_t half, int64_t cols,
                  float* evenCols, float* oddCols) {
  const int64_t xs2 = g.xs[2], xs3 = g.xs[3];
  // Columns t where both 2t - padLeft and 2t + 1 - padLeft are inside.
  const int64_t tLo = std::min(cols, (g.padLeft + 1) / 2);
  const int64_t lastPair = g.w - 2 + g.padLeft;  // 2t <= lastPair
  const int64_t tHi = lastPair < 0 ? tLo : std::max(tLo, std::min(cols, lastPair / 2 + 1));
  for (int64_t r = 0; r < 2 * half; ++r) {
    float* even = evenCols + ((r & 1) * half + r / 2) * cols;
    float* odd = oddCols + ((r & 1) * half + r / 2) * cols;
    const int64_t ih = firstRow + r - g.padTop;
    if (ih < 0 || ih >= g.h) {
      std::fill(even, even + cols, 0.0f);
      std::fill(odd, odd + cols, 0.0f);
      continue;
    }
    const float* row = plane + ih * xs2;
    auto at = [&](int64_t iw) { return iw >= 0 && iw < g.w ? row[iw * xs3] : 0.0f; };
    for (int64_t t = 0; t < tLo; ++t) {
      even[t] = at(2 * t - g.padLeft);
      odd[t] = at(2 * t + 1 - g.padLeft);
    }
    const float* base = row + (2 * tLo - g.padLeft) * xs3;
    if (xs3 == 1) {
      for (int64_t t = tLo; t < tHi; ++t) {
        even[t] = base[2 * (t - tLo)];
        odd[t] = base[2 * (t - tLo) + 1];
      }
    } else {
      for (int64_t t = tLo; t < tHi; ++t) {
        even[t] = base[2 * (t - tLo) * xs3];
        odd[t] = base[(2 * (t - tLo) + 1) * xs3];
      }
    }
    for (int64_t t = tHi; t < cols; ++t) {
      even[t] = at(2 * t - g.padLeft);
      odd[t] = at(2 * t + 1 - g.padLeft);
    }
  }
}

/// B^T d B for every tile of one channel: the rows' transform (d B) from
/// the even/odd split (splitColumns: `half` even rows, then `half` odd ones,
/// `tiles.stride()` floats each) into h [2 parities][4][half rows], then the
/// columns' (B^T .) into v[k][tile] (k planes `planeStride` apart; each tile
/// row's extra tile zero).
KILN_VECTOR_CLONES
void transformInputChannel(const float* even, const float* odd, int64_t half, const Tiles& tiles, float* h,
                           float* v, int64_t planeStride) {
  const int64_t cols = tiles.stride(), n = half * cols;
  for (int parity = 0; parity < 2; ++parity) {
    const float* e = even + parity * n;
    const float* o = odd + parity * n;
    float* h0 = h + parity * 4 * n;
    float* h1 = h0 + n;
    float* h2 = h1 + n;
    float* h3 = h2 + n;
    // Each row's last value (past its last tile) reads the next row's
    // first: never used.
    #pragma GCC ivdep
    for (int64_t i = 0; i < n - 1; ++i) {
      const float d0 = e[i], d1 = o[i], d2 = e[i + 1], d3 = o[i + 1];
      h0[i] = d0 - d2;
      h1[i] = d1 + d2;
      h2[i] = d2 - d1;
      h3[i] = d1 - d3;
    }
    h0[n - 1] = h1[n - 1] = h2[n - 1] = h3[n - 1] = 0.0f;
  }
  // Tile row ty reads padded rows 2 ty .. 2 ty + 3: even rows ty and ty + 1,
  // odd rows ty and ty + 1, at ty * cols of their parity's planes.
  const int64_t count = tiles.count();
  for (int s = 0; s < 4; ++s) {
    const float* a = h + s * n;
    const float* b = h + (4 + s) * n;
    const float* c = a + cols;
    const float* d = b + cols;
    float* v0 = v + s * planeStride;
    float* v1 = v + (4 + s) * planeStride;
    float* v2 = v + (8 + s) * planeStride;
    float* v3 = v + (12 + s) * planeStride;
    #pragma GCC ivdep
    for (int64_t i = 0; i < count; ++i) {
      v0[i] = a[i] - c[i];
      v1[i] = b[i] + c[i];
      v2[i] = c[i] - b[i];
      v3[i] = b[i] - d[i];
    }
    for (int64_t i = tiles.tw; i < count; i += cols) v0[i] = v1[i] = v2[i] = v3[i] = 0.0f;
  }
}

/// A^T M A for every tile of one output channel: m[k][tile] (k planes
/// `planeStride` apart) into out [ho, wo]; y holds 4 * tiles.count() floats.
KILN_VECTOR_CLONES
void transformOutputChannel(const float* m, int64_t planeStride, const Tiles& tiles, int64_t ho, int64_t wo,
                            float* y, float* out) {
  const int64_t count = tiles.count(), cols = tiles.stride();
  float *y00 = y, *y01 = y + count, *y10 = y + 2 * count, *y11 = y + 3 * count;
  #pragma GCC ivdep
  for (int64_t i = 0; i < count; ++i) {
    float a0[4], a1[4];
    for (int s = 0; s < 4; ++s) {
      const float m0 = m[s * planeStride + i], m1 = m[(4 + s) * planeStride + i];
      const float m2 = m[(8 + s) * planeStride + i], m3 = m[(12 + s) * planeStride + i];
      a0[s] = m0 + m1 + m2;
      a1[s] = m1 - m2 - m3;
    }
    y00[i] = a0[0] + a0[1] + a0[2];
    y01[i] = a0[1] - a0[2] - a0[3];
    y10[i] = a1[0] + a1[1] + a1[2];
    y11[i] = a1[1] - a1[2] - a1[3];
  }
  // Interleave each tile's two columns into the output rows (the last tile
  // row and column may hang over the output's edge).
  const int64_t rows = std::min(ho, 2 * tiles.th), pairs = wo / 2;
  for (int64_t oy = 0; oy < rows; ++oy) {
    const int64_t at = oy / 2 * cols;
    const float* left = (oy % 2 ? y10 : y00) + at;
    const float* right = (oy % 2 ? y11 : y01) + at;
    float* row = out + oy * wo;
    #pragma GCC ivdep
    for (int64_t t = 0; t < pairs; ++t) {
      row[2 * t] = left[t];
      row[2 * t + 1] = right[t];
    }
    if (wo % 2) row[wo - 1] = left[pairs];
  }
}

/// A dY A^T for every 2x2 tile of one output-gradient plane (kh x kw,
/// dense; zero past its edges) into dm[k][tile] (k planes `planeStride`
/// apart); quad holds 4 * tw floats.
KILN_VECTOR_CLONES
void transformGradientChannel(const float* plane, int64_t kh, int64_t kw, const Tiles& tiles, float* quad, float* dm,
                              int64_t planeStride) {
  const int64_t tw = tiles.tw, full = kw / 2;  // tiles whose right column is inside
  float* __restrict p = quad;
  float* __restrict q = quad + tw;
  float* __restrict r = quad + 2 * tw;
  float* __restrict s = quad + 3 * tw;
  for (int64_t ty = 0; ty < tiles.th; ++ty) {
    // The tile row's top and bottom rows split into even (p, r) and odd
    // (q, s) columns; a missing bottom row or right column reads zero.
    const float* top = plane + 2 * ty * kw;
    const bool hasBottom = 2 * ty + 1 < kh;
    for (int64_t t = 0; t < full; ++t) {
      p[t] = top[2 * t];
      q[t] = top[2 * t + 1];
    }
    if (hasBottom) {
      const float* bottom = top + kw;
      for (int64_t t = 0; t < full; ++t) {
        r[t] = bottom[2 * t];
        s[t] = bottom[2 * t + 1];
      }
    } else {
      std::fill(r, r + full, 0.0f);
      std::fill(s, s + full, 0.0f);
    }
    if (full < tw) {  // odd width: the last tile's right column is outside
      p[full] = top[2 * full];
      q[full] = 0.0f;
      r[full] = hasBottom ? top[kw + 2 * full] : 0.0f;
      s[full] = 0.0f;
    }
    // Rows of A dY: [p q], [p+r q+s], [p-r q-s], [-r -s]; each row [u v]
    // times A^T: [u, u+v, u-v, -v].
    float* d = dm + ty * tiles.stride();
    auto store = [&](int row, const float* u, float su, const float* v, float sv, const float* u2, const float* v2) {
      float* __restrict d0 = d + (row * 4) * planeStride;
      float* __restrict d1 = d0 + planeStride;
      float* __restrict d2 = d1 + planeStride;
      float* __restrict d3 = d2 + planeStride;
#pragma GCC ivdep
      for (int64_t t = 0; t < tw; ++t) {
        const float uu = u[t] + su * u2[t], vv = v[t] + sv * v2[t];
        d0[t] = uu;
        d1[t] = uu + vv;
        d2[t] = uu - vv;
        d3[t] = -vv;
      }
    };
    store(0, p, 0.0f, q, 0.0f, r, s);
    store(1, p, 1.0f, q, 1.0f, r, s);
    store(2, p, -1.0f, q, -1.0f, r, s);
    store(3, r, -2.0f, s, -2.0f, r, s);  // -r = r - 2r
    for (int k = 0; k < kTaps; ++k) d[k * planeStride + tw] = 0.0f;  // the extra tile
  }
}

/// dW = G^T dU G (4x4 -> 3x3) for one (output, image) pair: dU[k] at
/// du[k * stride].
void transformFilterGradient(const float* du, int64_t stride, float* dw /* 3x3, rows 3 apart */) {
  float t[3][4];  // G^T dU
  for (int col = 0; col < 4; ++col) {
    const float d0 = du[col * stride], d1 = du[(4 + col) * stride], d2 = du[(8 + col) * stride],
                d3 = du[(12 + col) * stride];
    t[0][col] = d0 + 0.5f * (d1 + d2);
    t[1][col] = 0.5f * (d1 - d2);
    t[2][col] = 0.5f * (d1 + d2) + d3;
  }
  for (int row = 0; row < 3; ++row) {
    dw[row * 3] = t[row][0] + 0.5f * (t[row][1] + t[row][2]);
    dw[row * 3 + 1] = 0.5f * (t[row][1] - t[row][2]);
    dw[row * 3 + 2] = 0.5f * (t[row][1] + t[row][2]) + t[row][3];
  }
}

}  // namespace

bool winogradPays(int64_t c, int64_t co, int64_t kh, int64_t kw, int64_t strideH, int64_t strideW,
                  int64_t dilationH, int64_t dilationW, int64_t groups, int64_t ho, int64_t wo) {
  // Below 16 channels either way the GEMMs are too thin to gain from the
  // 2.25x fewer multiplies; below 8x8 outputs half-empty edge tiles and
  // the transforms' fixed costs eat it.
  return kh == 3 && kw == 3 && strideH == 1 && strideW == 1 && dilationH == 1 && dilationW == 1 && groups == 1 &&
         c >= 16 && co >= 16 && ho >= 8 && wo >= 8;
}

namespace {

/// Tiles in a strip of the filter gradient (conv2dWinogradFilterGrad): 4
/// tile rows of a 56-wide kernel.
constexpr int64_t kFilterGradStripTiles = 128;

/// Tiles a strip holds at least, so that its GEMMs stay wide enough for the
/// micro-kernel's 32 columns (a 56-wide image: 3 tile rows, 87 tiles with
/// their extra ones).
constexpr int64_t kMinStripTiles = 64;

/// Tile rows per strip: as many as keep a strip's transformed inputs and
/// products (16 (c + co) floats per tile) within half of a core's L2, so
/// that the input transform, the 16 GEMMs and the output transform pass
/// them on in L2. A whole image's (3.2 MiB each for 64 channels at 56x56)
/// went through L3 and back twice. With the flat transforms, strips of 4
/// tile rows took the ResNet block forward (bench_suite.cpp; 2 threads of a
/// Sapphire Rapids, 2 MiB L2) from 25.7 to 23.0 ms; 2 rows (58 tiles, GEMMs
/// too narrow) ran 25.8.
int64_t stripTileRows(const WinogradConv& g, const Tiles& tiles) {
  if (g.stripTileRows > 0) return std::min(tiles.th, g.stripTileRows);
  const int64_t rowBytes = static_cast<int64_t>(sizeof(float)) * kTaps * (g.c + g.co) * tiles.stride();
  const int64_t byCache = std::max<int64_t>(1, exec::levelTwoCacheBytes() / 2 / rowBytes);
  const int64_t byWidth = (kMinStripTiles + tiles.stride() - 1) / tiles.stride();
  return std::min(tiles.th, std::max(byCache, byWidth));
}

}  // namespace

void conv2dWinograd3x3(const WinogradConv& g, const float* x, const float* w, float* out, int64_t outNs,
                       int64_t outCs) {
  const Tiles tiles{(g.ho + 1) / 2, (g.wo + 1) / 2};
  thread_local ScratchSlot filterSlot, inputSlot, productSlot, rowSlot;
  ScratchBuffer filters(filterSlot, sizeof(float) * kTaps * g.co * g.c, "conv2d (Winograd filters)");
  transformFilters(w, g.co, g.c, filters.as<float>());
  const float* u = filters.as<float>();
  const int64_t stripRows = stripTileRows(g, tiles);
  const int64_t strips = (tiles.th + stripRows - 1) / stripRows;

  // Tile rows [first, first + stripRows) of one image, from its input rows
  // to its output rows; `parallel`: its channels' transforms and its GEMMs
  // split over the threads (otherwise strips run in parallel).
  auto strip = [&](int64_t img, int64_t first, bool parallel) {
    const Tiles part{std::min(stripRows, tiles.th - first), tiles.tw};
    const int64_t count = part.count();
    // The padded input the strip's tiles read: 2 half = 2 th + 2 rows from
    // padded row 2 first, tw + 1 even and odd columns.
    const int64_t half = part.th + 1, cols = part.stride();
    ScratchBuffer inputs(inputSlot, sizeof(float) * kTaps * g.c * count, "conv2d (Winograd inputs)");
    ScratchBuffer products(productSlot, sizeof(float) * kTaps * g.co * count, "conv2d (Winograd products)");
    float* v = inputs.as<float>();
    float* m = products.as<float>();
    auto inputChannels = [&](int64_t c0, int64_t c1) {
      ScratchBuffer work(rowSlot, sizeof(float) * 12 * half * cols, "conv2d (Winograd rows)");
      float* even = work.as<float>();
      float* odd = even + 2 * half * cols;
      float* h = odd + 2 * half * cols;
      for (int64_t ch = c0; ch < c1; ++ch) {
        splitColumns(g, x + img * g.xs[0] + ch * g.xs[1], 2 * first, half, cols, even, odd);
        transformInputChannel(even, odd, half, part, h, v + ch * count, g.c * count);
      }
    };
    auto outputChannels = [&](int64_t o0, int64_t o1) {
      ScratchBuffer work(rowSlot, sizeof(float) * 4 * count, "conv2d (Winograd rows)");
      for (int64_t o = o0; o < o1; ++o)
        transformOutputChannel(m + o * count, g.co * count, part, g.ho - 2 * first, g.wo, work.as<float>(),
                               out + img * outNs + o * outCs + 2 * first * g.wo);
    };
    if (parallel) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, g.c, 1),
                        [&](const tbb::blocked_range<int64_t>& r) { inputChannels(r.begin(), r.end()); });
    } else {
      inputChannels(0, g.c);
    }
    for (int k = 0; k < kTaps; ++k)
      gemm::sgemm(g.co, count, g.c, {u + k * g.co * g.c, g.c, 1}, {v + k * g.c * count, count, 1},
                  m + k * g.co * count, count, /*accumulate=*/false, parallel);
    if (parallel) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, g.co, 1),
                        [&](const tbb::blocked_range<int64_t>& r) { outputChannels(r.begin(), r.end()); });
    } else {
      outputChannels(0, g.co);
    }
  };
  // Whole strips per thread when they share out evenly (no synchronisation
  // inside one); otherwise one strip at a time, split.
  const int64_t threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const int64_t tasks = g.n * strips;
  if (tasks >= threads && (tasks % threads == 0 || tasks >= 4 * threads)) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t t = r.begin(); t < r.end(); ++t) strip(t / strips, t % strips * stripRows, false);
    });
  } else {
    for (int64_t t = 0; t < tasks; ++t) strip(t / strips, t % strips * stripRows, true);
  }
}

bool winogradFilterGradPays(int64_t images, int64_t co, int64_t kh, int64_t kw, int64_t strideH, int64_t strideW,
                            int64_t dilationH, int64_t dilationW, int64_t groups, int64_t ho, int64_t wo) {
  return ho == 3 && wo == 3 && strideH == 1 && strideW == 1 && dilationH == 1 && dilationW == 1 && groups == 1 &&
         images >= 16 && co >= 16 && kh >= 8 && kw >= 8;
}

void conv2dWinogradFilterGrad(const WinogradConv& g, int64_t kh, int64_t kw, const float* x, const float* kernel,
                              float* out, int64_t outNs, int64_t outCs) {
  // Tiles over the kernel (the forward's output positions); each reads the
  // same 4x4 input patches as the forward's tiles.
  const Tiles tiles{(kh + 1) / 2, (kw + 1) / 2};
  // A strip of tile rows at a time, as in the forward, so that its
  // transformed inputs and gradients stay in L2 for the GEMMs; a fixed
  // size, since each strip is one more term of the sums (bits independent
  // of the machine).
  const int64_t cols = tiles.stride();
  const int64_t stripRows = std::min(tiles.th, std::max<int64_t>(1, kFilterGradStripTiles / cols));
  const int64_t count = stripRows * cols, maxHalf = stripRows + 1;
  const int64_t images = g.n, taps = kh * kw, products = kTaps * g.co * images;
  // Channels in a fixed number of partial sums (bits independent of the
  // thread count), each run by one thread with serial GEMMs.
  const int64_t chunks = std::min<int64_t>(g.c, 8);
  thread_local ScratchSlot sumSlot;
  ScratchBuffer sums(sumSlot, sizeof(float) * chunks * products, "conv2d (Winograd filter gradients)");
  auto chunk = [&](int64_t t) {
    const int64_t c0 = g.c * t / chunks, c1 = g.c * (t + 1) / chunks;
    thread_local ScratchSlot inputSlot, gradientSlot, rowSlot;
    ScratchBuffer inputs(inputSlot, sizeof(float) * kTaps * images * count, "conv2d (Winograd inputs)");
    ScratchBuffer gradients(gradientSlot, sizeof(float) * kTaps * g.co * count, "conv2d (Winograd gradients)");
    ScratchBuffer work(rowSlot, sizeof(float) * 12 * maxHalf * cols, "conv2d (Winograd rows)");
    float* v = inputs.as<float>();
    float* dm = gradients.as<float>();
    float* even = work.as<float>();
    float* odd = even + 2 * maxHalf * cols;
    float* h = odd + 2 * maxHalf * cols;
    float* du = sums.as<float>() + t * products;  // [k][co][images]
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t first = 0; first < tiles.th; first += stripRows) {
        const Tiles part{std::min(stripRows, tiles.th - first), tiles.tw};
        const int64_t n = part.count(), half = part.th + 1;
        for (int64_t img = 0; img < images; ++img) {
          splitColumns(g, x + img * g.xs[0] + ch * g.xs[1], 2 * first, half, cols, even, odd);
          transformInputChannel(even, odd, half, part, h, v + img * n, images * n);
        }
        for (int64_t o = 0; o < g.co; ++o)
          transformGradientChannel(kernel + (o * g.c + ch) * taps + 2 * first * kw, kh - 2 * first, kw, part, h,
                                   dm + o * n, g.co * n);
        // dU_k [co, images] (+)= dM_k [co, tiles] x V_k [images, tiles]^T.
        for (int k = 0; k < kTaps; ++k)
          gemm::sgemm(g.co, images, n, {dm + k * g.co * n, n, 1}, {v + k * images * n, 1, n}, du + k * g.co * images,
                      images, /*accumulate=*/ch > c0 || first > 0, /*parallel=*/false);
      }
  };
  if (chunks == 1) {
    chunk(0);
  } else {
    tbb::parallel_for(int64_t{0}, chunks, chunk, tbb::static_partitioner());
  }
  float* du = sums.as<float>();
  for (int64_t t = 1; t < chunks; ++t)
    for (int64_t i = 0; i < products; ++i) du[i] += du[t * products + i];
  for (int64_t o = 0; o < g.co; ++o)
    for (int64_t img = 0; img < images; ++img) {
      float dw[9];
      transformFilterGradient(du + o * images + img, g.co * images, dw);
      float* dst = out + img * outNs + o * outCs;
      std::copy(dw, dw + 9, dst);
    }
}

}  // namespace kiln::interp
