// Matmul: a packed, cache-blocked f32 GEMM with an AVX2/FMA micro-kernel
// (chosen at run time, scalar fallback elsewhere), and a blocked loop for
// the other dtypes.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/interp/Dispatch.h"
#include "runtime/interp/Kernels.h"

namespace kiln::interp {

namespace {

constexpr int kMR = 6, kNR = 16;  // register tile: 6 rows x two 8-float vectors
constexpr int kKC = 256;          // depth of a packed panel (fits L1 with the B panel)
constexpr int kMC = 72;           // rows of A per packed block (L2)
constexpr int kNC = 2048;         // columns of B per packed block (L3)

/// A strided matrix operand: element (r, c) at p[r*rs + c*cs].
template <class T>
struct Mat {
  const T* p;
  int64_t rs, cs;
};

struct AlignedBuffer {
  float* data = nullptr;
  explicit AlignedBuffer(size_t n) {
    data = static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64));
    if (!data) throw Error("matmul: out of memory for packing buffers");
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

using MicroKernel = void (*)(int kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                             bool accumulate);

/// Writes (or adds) a full kMR x kNR accumulator tile into C, clipped to mr x nr.
inline void storeTile(const float* tile, float* c, int64_t ldc, int mr, int nr, bool accumulate) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * kNR + j] : tile[i * kNR + j];
}

void microKernelScalar(int kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                       bool accumulate) {
  float acc[kMR * kNR] = {};
  for (int k = 0; k < kc; ++k)
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kNR; ++j) acc[i * kNR + j] += a[k * kMR + i] * b[k * kNR + j];
  storeTile(acc, c, ldc, mr, nr, accumulate);
}

__attribute__((target("avx2,fma"))) void microKernelAvx2(int kc, const float* a, const float* b, float* c,
                                                         int64_t ldc, int mr, int nr, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b + k * kNR), b1 = _mm256_load_ps(b + k * kNR + 8);
    const float* ak = a + k * kMR;
    __m256 x = _mm256_broadcast_ss(ak + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(ak + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(ak + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(ak + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(ak + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(ak + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 rows[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMR && nr == kNR) {
    for (int i = 0; i < kMR; ++i) {
      float* ci = c + i * ldc;
      __m256 r0 = rows[i][0], r1 = rows[i][1];
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(ci));
        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(ci + 8));
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    }
    return;
  }
  alignas(32) float tile[kMR * kNR];
  for (int i = 0; i < kMR; ++i) {
    _mm256_store_ps(tile + i * kNR, rows[i][0]);
    _mm256_store_ps(tile + i * kNR + 8, rows[i][1]);
  }
  storeTile(tile, c, ldc, mr, nr, accumulate);
}

MicroKernel selectMicroKernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return microKernelAvx2;
  return microKernelScalar;
}

void packA(Mat<float> a, int64_t i0, int mc, int64_t k0, int kc, float* dst) {
  for (int p = 0; p < mc; p += kMR) {
    const int mr = std::min(kMR, mc - p);
    for (int k = 0; k < kc; ++k) {
      const float* src = a.p + (i0 + p) * a.rs + (k0 + k) * a.cs;
      float* d = dst + static_cast<int64_t>(p) * kc + k * kMR;
      int i = 0;
      for (; i < mr; ++i) d[i] = src[i * a.rs];
      for (; i < kMR; ++i) d[i] = 0;
    }
  }
}

void packBPanel(Mat<float> b, int64_t k0, int kc, int64_t j0, int nr, float* dst) {
  for (int k = 0; k < kc; ++k) {
    const float* src = b.p + (k0 + k) * b.rs + j0 * b.cs;
    float* d = dst + k * kNR;
    int j = 0;
    if (b.cs == 1) {
      std::memcpy(d, src, sizeof(float) * nr);
      j = nr;
    } else {
      for (; j < nr; ++j) d[j] = src[j * b.cs];
    }
    for (; j < kNR; ++j) d[j] = 0;
  }
}

/// C[M,N] (row stride ldc) = A[M,K] * B[K,N], or += with `accumulateC`.
/// `parallel`: use TBB inside.
void sgemm(int64_t M, int64_t N, int64_t K, Mat<float> a, Mat<float> b, float* c, int64_t ldc, bool parallel,
           bool accumulateC) {
  static const MicroKernel kernel = selectMicroKernel();
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulateC)
      for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
    return;
  }
  AlignedBuffer bPack(static_cast<size_t>(kKC) * ((std::min<int64_t>(N, kNC) + kNR - 1) / kNR * kNR));
  for (int64_t jc = 0; jc < N; jc += kNC) {
    const int nc = static_cast<int>(std::min<int64_t>(kNC, N - jc));
    const int nPanels = (nc + kNR - 1) / kNR;
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int kc = static_cast<int>(std::min<int64_t>(kKC, K - pc));
      auto packPanels = [&](int p0, int p1) {
        for (int p = p0; p < p1; ++p)
          packBPanel(b, pc, kc, jc + p * kNR, std::min(kNR, nc - p * kNR), bPack.data + static_cast<int64_t>(p) * kc * kNR);
      };
      if (parallel && nPanels > 8) {
        tbb::parallel_for(tbb::blocked_range<int>(0, nPanels, 4),
                          [&](const tbb::blocked_range<int>& r) { packPanels(r.begin(), r.end()); });
      } else {
        packPanels(0, nPanels);
      }
      const bool accumulate = pc > 0 || accumulateC;
      auto rowBlocks = [&](int64_t blk0, int64_t blk1) {
        AlignedBuffer aPack(static_cast<size_t>(kMC) * kKC);
        for (int64_t blk = blk0; blk < blk1; ++blk) {
          const int64_t ic = blk * kMC;
          const int mc = static_cast<int>(std::min<int64_t>(kMC, M - ic));
          packA(a, ic, mc, pc, kc, aPack.data);
          for (int p = 0; p < nPanels; ++p) {
            const int nr = std::min(kNR, nc - p * kNR);
            const float* bp = bPack.data + static_cast<int64_t>(p) * kc * kNR;
            for (int ir = 0; ir < mc; ir += kMR) {
              kernel(kc, aPack.data + static_cast<int64_t>(ir) * kc, bp, c + (ic + ir) * ldc + jc + p * kNR, ldc,
                     std::min(kMR, mc - ir), nr, accumulate);
            }
          }
        }
      };
      const int64_t blocks = (M + kMC - 1) / kMC;
      if (parallel && blocks > 1) {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks, 1),
                          [&](const tbb::blocked_range<int64_t>& r) { rowBlocks(r.begin(), r.end()); });
      } else {
        rowBlocks(0, blocks);
      }
    }
  }
}

/// Blocked i-k-j loop for f64 and integer types (integers wrap).
template <class T>
void gemmGeneric(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c) {
  std::fill(c, c + M * N, T(0));
  constexpr int64_t kBlock = 64;
  for (int64_t i0 = 0; i0 < M; i0 += kBlock) {
    for (int64_t k0 = 0; k0 < K; k0 += kBlock) {
      const int64_t i1 = std::min(M, i0 + kBlock), k1 = std::min(K, k0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) {
        T* ci = c + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const T aik = a.p[i * a.rs + k * a.cs];
          const T* bk = b.p + k * b.rs;
          if constexpr (std::is_integral_v<T>) {
            using U = std::make_unsigned_t<T>;
            for (int64_t j = 0; j < N; ++j)
              ci[j] = static_cast<T>(static_cast<U>(ci[j]) + static_cast<U>(aik) * static_cast<U>(bk[j * b.cs]));
          } else {
            for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j * b.cs];
          }
        }
      }
    }
  }
}

}  // namespace

void sgemmAccumulate(int64_t M, int64_t N, int64_t K, const float* a, int64_t rsA, int64_t csA, const float* b,
                     int64_t rsB, int64_t csB, float* c, int64_t rsC, int64_t csC) {
  if (csC == 1) {
    sgemm(M, N, K, Mat<float>{a, rsA, csA}, Mat<float>{b, rsB, csB}, c, rsC, true, true);
    return;
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = c[i * rsC + j * csC];
      for (int64_t k = 0; k < K; ++k) acc += a[i * rsA + k * csA] * b[k * rsB + j * csB];
      c[i * rsC + j * csC] = acc;
    }
}

void matmulKernel(const Arg& a, const Arg& b, const Shape& outShape, char* out) {
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= outShape[d];
  if (batches == 0) return;
  // Element offsets of batch `bi` in a and b (their batch dims equal outShape's).
  auto batchOffset = [&](const Arg& x, int64_t bi) {
    int64_t off = 0;
    for (int d = r - 3; d >= 0; --d) {
      off += (bi % outShape[d]) * x.strides[d];
      bi /= outShape[d];
    }
    return off;
  };
  const bool smallBatches = batches > 1 && M * N * K < (1 << 18);
  dispatchNumeric(a.dtype, [&]<class T>() {
    const T* ap = reinterpret_cast<const T*>(a.data);
    const T* bp = reinterpret_cast<const T*>(b.data);
    T* op = reinterpret_cast<T*>(out);
    auto one = [&](int64_t bi, bool parallel) {
      Mat<T> am{ap + batchOffset(a, bi), a.strides[r - 2], a.strides[r - 1]};
      Mat<T> bm{bp + batchOffset(b, bi), b.strides[r - 2], b.strides[r - 1]};
      T* c = op + bi * M * N;
      if constexpr (std::is_same_v<T, float>) {
        sgemm(M, N, K, am, bm, c, N, parallel, false);
      } else {
        gemmGeneric<T>(M, N, K, am, bm, c);
      }
    };
    if (smallBatches || !std::is_same_v<T, float>) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, batches, 1), [&](const tbb::blocked_range<int64_t>& rg) {
        for (int64_t bi = rg.begin(); bi < rg.end(); ++bi) one(bi, false);
      });
    } else {
      for (int64_t bi = 0; bi < batches; ++bi) one(bi, true);
    }
  });
}

}  // namespace kiln::interp
