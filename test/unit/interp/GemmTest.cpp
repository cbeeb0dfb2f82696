// The f32 GEMM (runtime/interp/gemm) against a double reference loop, once
// per micro-kernel ISA this CPU can run: edge shapes around the register tile
// and the cache blocks, strided and transposed operands, accumulation, and C
// left alone outside its M x N window.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <tuple>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/Half.h"
#include "runtime/interp/gemm/MicroKernel.h"
#include "runtime/interp/gemm/Sgemm.h"
#include "runtime/interp/gemm/WorkSplit.h"

namespace kiln::interp::gemm {
namespace {

constexpr float kSentinel = 12345.f;

/// An operand stored with the given layout: row-major (rs = cols + pad,
/// cs = 1) or column-major / transposed (rs = 1, cs = rows + pad).
struct Operand {
  int64_t rows, cols;
  bool transposed;
  std::vector<float> storage;
  int64_t rs, cs;
  Operand(int64_t r, int64_t c, bool t, int pad, std::mt19937& rng) : rows(r), cols(c), transposed(t) {
    rs = t ? 1 : c + pad;
    cs = t ? r + pad : 1;
    storage.assign(static_cast<size_t>(std::max<int64_t>(1, (t ? c : r) * (t ? r + pad : c + pad))), kSentinel);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) storage[i * rs + j * cs] = d(rng);
  }
  float at(int64_t i, int64_t j) const { return storage[i * rs + j * cs]; }
  StridedMatrix view() const { return {storage.data(), rs, cs}; }
};

struct Case {
  int64_t M, N, K;
  bool transA = false, transB = false;
  int pad = 0;  // extra elements per row/column of A, B and C
  bool accumulate = false, parallel = true;
};

std::string describe(const Case& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + (c.transA ? " A^T" : "") +
         (c.transB ? " B^T" : "") + " pad " + std::to_string(c.pad) + (c.accumulate ? " C+=" : " C=") +
         (c.parallel ? " parallel" : " serial");
}

/// Runs sgemm on `c` and compares with a double loop; an error bound of
/// 2 (K + 2) u sum |a b| holds for any summation order.
void check(const Case& cs, uint32_t seed) {
  SCOPED_TRACE(describe(cs));
  std::mt19937 rng(seed);
  Operand a(cs.M, cs.K, cs.transA, cs.pad, rng), b(cs.K, cs.N, cs.transB, cs.pad, rng);
  const int64_t ldc = cs.N + cs.pad;
  // C has one row past M, so a store past the window would show.
  std::vector<float> c(static_cast<size_t>((cs.M + 1) * ldc), kSentinel);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < cs.M; ++i)
    for (int64_t j = 0; j < cs.N; ++j) c[i * ldc + j] = d(rng);
  const std::vector<float> c0 = c;
  sgemm(cs.M, cs.N, cs.K, a.view(), b.view(), c.data(), ldc, cs.accumulate, cs.parallel);
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
        const double p = static_cast<double>(a.at(i, k)) * b.at(k, j);
        ref += p;
        mag += std::fabs(p);
      }
      const double tol = 2.0 * static_cast<double>(cs.K + 2) * u * mag + 1e-30;
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << got << ", expected " << ref << " (tolerance " << tol << ")";
    }
  EXPECT_EQ(bad, 0);
}

class GemmIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpuSupports(GetParam())) GTEST_SKIP() << "this CPU cannot run " << isaName(GetParam());
    previous_ = setActiveIsa(GetParam());
    ASSERT_EQ(activeIsa(), GetParam());
  }
  void TearDown() override {
    if (cpuSupports(GetParam())) setActiveIsa(previous_);
  }
  const MicroKernel& kernel() const { return microKernelFor(GetParam()); }

 private:
  Isa previous_ = Isa::scalar;
};

TEST_P(GemmIsaTest, ThinAndDegenerateShapes) {
  uint32_t seed = 1;
  for (Case c : std::vector<Case>{{1, 1, 1},   {1, 37, 5},  {37, 1, 5},  {1, 1, 300}, {5, 7, 1},
                                  {3, 2, 0},   {0, 4, 3},   {4, 0, 3},   {1, 100, 1}, {100, 1, 1}})
    check(c, seed++);
  // K = 0 accumulating leaves C as it was.
  check({6, 9, 0, false, false, 1, true}, seed++);
}

TEST_P(GemmIsaTest, EveryRowAndColumnRemainderOfTheTile) {
  const int mr = kernel().mr, nr = kernel().nr;
  uint32_t seed = 100;
  for (int m = 1; m <= mr + 1; ++m) check({m, nr + 5, 9}, seed++);                 // every partial row count
  for (int n = 1; n <= nr + 1; ++n) check({2 * mr + 3, n, 7}, seed++);             // every column mask
  // The same through a transposed B, whose columns are packed by transposing
  // blocks (8 x 8 on AVX2): every column count, depths short of and past a
  // block, unpacked (small) and packed.
  for (int n = 1; n <= nr + 1; ++n)
    for (int64_t k : {3, 13}) check({2 * mr + 3, n, k, false, true, 1}, seed++);
  for (int m = 1; m <= mr + 1; ++m) {
    check({m, 3 * nr + 1, 1500, false, true}, seed++);
    check({30 * mr + m, 3 * nr + 1, 700, false, true}, seed++);
  }
  check({3 * mr - 1, 3 * nr - 1, 33, false, false, 3}, seed++);                    // both ragged, padded rows
}

TEST_P(GemmIsaTest, AcrossTheCacheBlocks) {
  const MicroKernel& k = kernel();
  uint32_t seed = 200;
  // K past one and two panels, M past the A block, N past the B block.
  check({k.mc + k.mr + 1, 2 * k.nr + 3, 2 * k.kc + 5}, seed++);
  check({2 * k.mc + 3, k.nr + 1, k.kc + 1, false, false, 0, true}, seed++);
  check({3, k.nc + k.nr + 7, 40}, seed++);
  check({k.mc + 5, k.nc + 3, k.kc + 9, false, false, 0, false, false}, seed++);
  // Column-major B (a transposed view) past a panel's depth and width.
  check({k.mr + 3, 2 * k.nr + 7, k.kc + 9, false, true, 2}, seed++);
}

TEST_P(GemmIsaTest, ColumnMajorBGivesTheBitsOfItsRowMajorCopy) {
  // Compiled kernels multiply by transposed views where they once copied
  // (kiln-cpu-fold-matmul-transposes): packing either layout must give the
  // same panels, so the same bits.
  std::mt19937 rng(450);
  const int64_t M = 37, N = 2 * kernel().nr + 5, K = 77;
  Operand a(M, K, false, 0, rng), columnMajor(K, N, true, 3, rng);
  std::vector<float> rowMajor(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < N; ++j) rowMajor[i * N + j] = columnMajor.at(i, j);
  std::vector<float> viaView(M * N), viaCopy(M * N);
  sgemm(M, N, K, a.view(), columnMajor.view(), viaView.data(), N, false, true);
  sgemm(M, N, K, a.view(), StridedMatrix{rowMajor.data(), N, 1}, viaCopy.data(), N, false, true);
  EXPECT_EQ(viaView, viaCopy);
}

/// The process's resident memory in KiB (VmRSS), 0 where unknown.
long residentKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

TEST_P(GemmIsaTest, ADeepProductWithColumnMajorBKeepsNoDepthSizedScratch) {
  // A matrix-vector product over 2^22 terms with B a transposed view: the
  // unpacked path packed B's column whole into a panel NR wide (512 MiB for
  // 16 MiB of B on AVX-512) and the thread kept it. The blocked path packs
  // a block at a time.
  const int64_t M = 1, N = 1, K = int64_t{1} << 22;
  std::vector<float> a(static_cast<size_t>(K)), b(static_cast<size_t>(K));
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> dist(-1, 1);
  double want = 0;
  for (int64_t k = 0; k < K; ++k) {
    a[k] = dist(rng);
    b[k] = dist(rng);
    want += static_cast<double>(a[k]) * b[k];
  }
  const long before = residentKiB();
  float c = 0;
  sgemm(M, N, K, StridedMatrix{a.data(), K, 1}, StridedMatrix{b.data(), 1, K}, &c, 1, false, false);
  const long grown = residentKiB() - before;
  EXPECT_NEAR(c, want, 1e-3 * std::sqrt(static_cast<double>(K)));
  if (before > 0) {
    EXPECT_LT(grown, 64 * 1024) << "KiB more resident after one product";
  }
}

TEST_P(GemmIsaTest, TransposedAndStridedOperands) {
  uint32_t seed = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int pad : {0, 3}) {
        check({45, 70, 130, ta, tb, pad}, seed++);
        check({17, 33, 300, ta, tb, pad, true}, seed++);
        check({1, 65, 20, ta, tb, pad, false, false}, seed++);
        // Packed (past the direct path's size), A's last panel short, split
        // by rows (N = 90) and by columns (N = 300).
        check({150, 90, 520, ta, tb, pad}, seed++);
        check({100, 300, 200, ta, tb, pad}, seed++);
      }
}

TEST_P(GemmIsaTest, SerialAndParallelAgreeBitForBit) {
  // The split over threads changes which thread computes a tile, never the
  // order of a tile's sums, so both give the same bits.
  std::mt19937 rng(400);
  const int64_t M = 150, N = 90, K = 520;
  Operand a(M, K, false, 0, rng), b(K, N, true, 1, rng);
  std::vector<float> serial(M * N), parallel(M * N);
  sgemm(M, N, K, a.view(), b.view(), serial.data(), N, false, false);
  sgemm(M, N, K, a.view(), b.view(), parallel.data(), N, false, true);
  EXPECT_EQ(serial, parallel);
  // Wide enough for column groups (splitWork), A transposed.
  const int64_t wide = 300;
  Operand at(M, K, true, 2, rng), bw(K, wide, false, 0, rng);
  std::vector<float> serialWide(M * wide), parallelWide(M * wide);
  sgemm(M, wide, K, at.view(), bw.view(), serialWide.data(), wide, false, false);
  sgemm(M, wide, K, at.view(), bw.view(), parallelWide.data(), wide, false, true);
  EXPECT_EQ(serialWide, parallelWide);
  // On 3 and 4 threads: grids of several rows and column groups, and
  // threads taking the blocks of other groups.
  for (int threads : {3, 4}) {
    std::vector<float> more(M * wide);
    tbb::task_arena(threads).execute(
        [&] { sgemm(M, wide, K, at.view(), bw.view(), more.data(), wide, false, true); });
    EXPECT_EQ(serialWide, more) << threads << " threads";
  }
}

TEST_P(GemmIsaTest, UnpackedSmallProductsGiveThePackedBits) {
  // Products of up to 2^20 multiply-adds run on the unpacked operands (where
  // the ISA has such a tile), larger ones packed (unless the tuner chose the
  // unpacked product for the shape: TunerTest checks every candidate's
  // bits): the first 40 columns of a
  // 400-column product must be the 40-column product's bits, for each layout
  // of A and B, accumulating or not, ragged in every dimension, and two depth
  // passes deep (K = 512).
  std::mt19937 rng(600);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [M, K, accumulate] : std::vector<std::tuple<int64_t, int64_t, bool>>{{37, 77, false}, {13, 512, true}}) {
        SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(K) + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                     (accumulate ? " C+=" : ""));
        const int64_t wide = 400, narrow = 40;
        Operand a(M, K, ta, 1, rng), b(K, wide, tb, 2, rng);
        std::vector<float> cWide(M * wide), cNarrow(M * narrow);
        std::uniform_real_distribution<float> d(-1.f, 1.f);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < wide; ++j) {
            cWide[i * wide + j] = d(rng);
            if (j < narrow) cNarrow[i * narrow + j] = cWide[i * wide + j];
          }
        ASSERT_GT(M * wide * K, kSplitMultiplyAdds);
        ASSERT_LE(M * narrow * K, kSplitMultiplyAdds);
        sgemm(M, wide, K, a.view(), b.view(), cWide.data(), wide, accumulate, true);
        sgemm(M, narrow, K, a.view(), b.view(), cNarrow.data(), narrow, accumulate, true);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < narrow; ++j)
            ASSERT_EQ(cNarrow[i * narrow + j], cWide[i * wide + j]) << "C(" << i << "," << j << ")";
      }
}

TEST_P(GemmIsaTest, EpilogueAddsTheBiasAndRectifiesEveryTileOnce) {
  // The epilogue runs on each tile after the last depth pass, in the
  // micro-kernel's store (a contiguous bias) or on the stored tile (a
  // strided one): with K past one panel (two passes), M and N past the
  // blocks and ragged, products small enough to run unpacked, a strided
  // bias, and a NaN in A (ReLU keeps it), it must equal the product
  // followed by a separate bias + ReLU pass, bit for bit.
  const MicroKernel& k = kernel();
  std::mt19937 rng(500);
  for (auto [M, N, K, biasStride, relu] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>>{
           {k.mc + 5, k.nc + 3, k.kc + 9, 1, true}, {37, 2 * k.nr + 5, 77, 3, true}, {5, 7, 3, 1, false},
           {13, 2 * k.nr + 7, 40, 1, true}, {9, 11, 0, 2, true}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    Operand a(M, K, false, 0, rng), b(K, N, false, 0, rng);
    if (K > 0) a.storage[0] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> bias(static_cast<size_t>(N * biasStride));
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (float& x : bias) x = d(rng);
    std::vector<float> fused(M * N, kSentinel), separate(M * N, kSentinel);
    const Epilogue e{bias.data(), biasStride, relu};
    sgemm(M, N, K, a.view(), b.view(), fused.data(), N, false, true, &e);
    sgemm(M, N, K, a.view(), b.view(), separate.data(), N, false, true);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float& x = separate[i * N + j];
        x += bias[j * biasStride];
        if (relu) x = x < 0.0f ? 0.0f : x;
      }
    for (int64_t i = 0; i < M * N; ++i)
      if (!(fused[i] == separate[i] || (std::isnan(fused[i]) && std::isnan(separate[i]))))
        FAIL() << "element " << i << ": " << fused[i] << " vs " << separate[i];
    if (K > 0) {
      EXPECT_TRUE(std::isnan(fused[0]));  // row 0 of a NaN A
    }
  }
}

/// An operand of Operand's layout stored as bf16 or f16 (`storage`): its
/// values rounded to the half type, with -0, an infinity and, for f16, a
/// subnormal among them; f32() is the operand a cast to f32 would give.
struct HalfOperand {
  Operand layout;
  Storage storage;
  std::vector<uint16_t> bits;
  HalfOperand(int64_t r, int64_t c, bool t, int pad, Storage s, std::mt19937& rng)
      : layout(r, c, t, pad, rng), storage(s), bits(layout.storage.size()) {
    for (size_t i = 0; i < bits.size(); ++i)
      bits[i] = s == Storage::bf16 ? core::floatToBf16(layout.storage[i]) : core::floatToHalf(layout.storage[i]);
    if (r * c >= 3) {
      bits[static_cast<size_t>(layout.rs)] = 0x8000;                                            // -0
      bits[static_cast<size_t>(layout.cs)] = s == Storage::bf16 ? 0x7f80 : 0x7c00;               // +inf
      bits[static_cast<size_t>(layout.rs + layout.cs)] = s == Storage::bf16 ? 0x0001 : 0x0003;  // tiny
    }
  }
  StoredMatrix view() const { return {bits.data(), layout.rs, layout.cs, storage}; }
  /// The same operand as f32 (the cast's values), same layout.
  std::vector<float> f32() const {
    std::vector<float> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      out[i] = storage == Storage::bf16 ? core::bf16ToFloat(bits[i]) : core::halfToFloat(bits[i]);
    return out;
  }
};

TEST_P(GemmIsaTest, HalfStoredOperandsGiveTheBitsOfTheirF32Copies) {
  // sgemmWidening widens bf16 and f16 operands as it packs them: for A, B or
  // both stored as a half type, in every layout, small (widened whole, run
  // unpacked) and packed (several column blocks, two depth passes, ragged
  // panels, split over 3 threads), accumulating, with an epilogue, the
  // product must be sgemm's on the f32 copies bit for bit (a NaN from an
  // infinity times 0 matches any NaN).
  const MicroKernel& k = kernel();
  std::mt19937 rng(700);
  struct Shape {
    int64_t M, N, K;
    bool accumulate;
  };
  const std::vector<Shape> shapes = {
      {37, 40, 77, false}, {5, 3, 2, true}, {150, 2 * k.nc + 40, 130, false}, {60, 100, k.kc + 76, true}};
  int64_t products = 0;
  for (Storage storage : {Storage::bf16, Storage::f16})
    for (int halves = 1; halves <= 3; ++halves)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (const Shape& sh : shapes) {
            const bool halfA = halves & 1, halfB = halves & 2;
            SCOPED_TRACE(std::string(storage == Storage::bf16 ? "bf16" : "f16") + (halfA ? " A" : "") +
                         (halfB ? " B" : "") + (ta ? " A^T " : " ") + (tb ? "B^T " : "") + std::to_string(sh.M) +
                         "x" + std::to_string(sh.N) + "x" + std::to_string(sh.K));
            HalfOperand a(sh.M, sh.K, ta, 1, storage, rng), b(sh.K, sh.N, tb, 2, storage, rng);
            const std::vector<float> af = a.f32(), bf = b.f32();
            std::vector<float> bias(static_cast<size_t>(sh.N));
            std::uniform_real_distribution<float> d(-1.f, 1.f);
            for (float& x : bias) x = d(rng);
            const Epilogue e{bias.data(), 1, true};
            std::vector<float> want(static_cast<size_t>(sh.M * sh.N)), got;
            for (float& x : want) x = d(rng);
            got = want;
            const StoredMatrix aStored = halfA ? a.view() : StoredMatrix{af.data(), a.layout.rs, a.layout.cs};
            const StoredMatrix bStored = halfB ? b.view() : StoredMatrix{bf.data(), b.layout.rs, b.layout.cs};
            sgemm(sh.M, sh.N, sh.K, {af.data(), a.layout.rs, a.layout.cs}, {bf.data(), b.layout.rs, b.layout.cs},
                  want.data(), sh.N, sh.accumulate, true, &e);
            tbb::task_arena(3).execute([&] {
              sgemmWidening(sh.M, sh.N, sh.K, aStored, bStored, got.data(), sh.N, sh.accumulate, true, &e);
            });
            ++products;
            for (size_t i = 0; i < want.size(); ++i)
              if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) {
                ADD_FAILURE() << "element " << i << ": " << got[i] << ", expected " << want[i];
                break;
              }
          }
  EXPECT_EQ(products, 2 * 3 * 4 * static_cast<int64_t>(shapes.size()));
  // Neither stride 1 (every other element of every other row), small and
  // packed: the strided widening paths.
  for (Storage storage : {Storage::bf16, Storage::f16})
    for (const Shape& sh : {Shape{9, 20, 30, false}, Shape{150, 2 * k.nr + 5, 300, true}}) {
      SCOPED_TRACE(std::string(storage == Storage::bf16 ? "bf16" : "f16") + " strided " + std::to_string(sh.M) +
                   "x" + std::to_string(sh.N) + "x" + std::to_string(sh.K));
      HalfOperand a(2 * sh.M, 2 * sh.K, false, 0, storage, rng), b(2 * sh.K, 2 * sh.N, true, 0, storage, rng);
      const std::vector<float> af = a.f32(), bf = b.f32();
      const int64_t ars = 2 * a.layout.rs, acs = 2 * a.layout.cs, brs = 2 * b.layout.rs, bcs = 2 * b.layout.cs;
      std::vector<float> want(static_cast<size_t>(sh.M * sh.N), 0.5f), got = want;
      sgemm(sh.M, sh.N, sh.K, {af.data(), ars, acs}, {bf.data(), brs, bcs}, want.data(), sh.N, sh.accumulate, true);
      sgemmWidening(sh.M, sh.N, sh.K, {a.bits.data(), ars, acs, storage}, {b.bits.data(), brs, bcs, storage},
                    got.data(), sh.N, sh.accumulate, true);
      for (size_t i = 0; i < want.size(); ++i)
        if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) {
          ADD_FAILURE() << "element " << i << ": " << got[i] << ", expected " << want[i];
          break;
        }
    }
}

TEST_P(GemmIsaTest, EpilogueAddsAResidualAfterTheBias) {
  // relu?(((c * scale?) + bias) + residual): a residual matrix with padded
  // rows, with a contiguous bias (in the tile's store), a strided one (on
  // the stored tile), or none, scaled or not; packed and unpacked products,
  // two depth passes, no depth. Bit for bit the separate passes in that
  // order (each its own loop here, so none becomes a fused multiply-add).
  const MicroKernel& k = kernel();
  std::mt19937 rng(600);
  int caseIndex = 0;
  for (auto [M, N, K, biasStride, relu] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>>{
           {k.mc + 5, k.nc + 3, k.kc + 9, 1, true}, {37, 2 * k.nr + 5, 77, 3, false}, {5, 7, 3, 0, true},
           {13, 2 * k.nr + 7, 40, 1, false}, {9, 11, 0, 2, true}, {2 * k.mr + 1, k.nr - 1, 19, 0, false}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " bias stride " +
                 std::to_string(biasStride) + (relu ? " relu" : "") + (caseIndex % 2 == 0 ? " scaled" : ""));
    Operand a(M, K, false, 0, rng), b(K, N, false, 0, rng);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> bias(static_cast<size_t>(std::max<int64_t>(1, N * biasStride)));
    for (float& x : bias) x = d(rng);
    const int64_t residualRs = N + 3;
    std::vector<float> residual(static_cast<size_t>(M * residualRs), std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) residual[i * residualRs + j] = 4.0f * d(rng);  // NaN padding: read past N shows
    std::vector<float> fused(M * N, kSentinel), separate(M * N, kSentinel);
    Epilogue e{biasStride ? bias.data() : nullptr, std::max<int64_t>(1, biasStride), relu};
    e.residual = residual.data();
    e.residualRs = residualRs;
    e.scaled = (caseIndex++) % 2 == 0;  // every other case
    e.scale = 0.37f;
    sgemm(M, N, K, a.view(), b.view(), fused.data(), N, false, true, &e);
    sgemm(M, N, K, a.view(), b.view(), separate.data(), N, false, true);
    if (e.scaled)
      for (float& x : separate) x *= e.scale;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float& x = separate[i * N + j];
        if (biasStride) x += bias[j * biasStride];
        x += residual[i * residualRs + j];
        if (relu) x = x < 0.0f ? 0.0f : x;
      }
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(fused[i]), std::bit_cast<uint32_t>(separate[i]))
          << "element " << i << ": " << fused[i] << " vs " << separate[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GemmIsaTest, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isaName(info.param)); });

TEST(GemmIsa, SetActiveIsaClampsToTheCpu) {
  const Isa before = activeIsa();
  setActiveIsa(Isa::avx512);
  EXPECT_EQ(activeIsa(), cpuSupports(Isa::avx512) ? Isa::avx512 : cpuSupports(Isa::avx2) ? Isa::avx2 : Isa::scalar);
  setActiveIsa(Isa::scalar);
  EXPECT_EQ(activeIsa(), Isa::scalar);
  setActiveIsa(before);
}

TEST(GemmIsa, DefaultIsTheBestTheCpuRunsOrTheEnvironmentsChoice) {
  // CTest runs this once as is and once with KILN_GEMM_ISA=avx2.
  const char* env = std::getenv("KILN_GEMM_ISA");
  const Isa best = cpuSupports(Isa::avx512) ? Isa::avx512 : cpuSupports(Isa::avx2) ? Isa::avx2 : Isa::scalar;
  if (env && std::string(env) == "avx2" && cpuSupports(Isa::avx2)) {
    EXPECT_EQ(activeIsa(), Isa::avx2);
  } else if (!env) {
    EXPECT_EQ(activeIsa(), best);
  }
}

TEST(GemmWorkSplit, BalancesTheSlowestTask) {
  // Enough column panels: each thread its own columns, whose B panels it
  // packed (1024^3 on 2 threads).
  EXPECT_EQ(splitWork(74, 32, 2).rows, 1);
  EXPECT_EQ(splitWork(74, 32, 2).cols, 2);
  EXPECT_EQ(splitWork(10, 16, 2).cols, 2);
  // Two column panels and many rows: split rows.
  EXPECT_EQ(splitWork(74, 2, 2).rows, 2);
  EXPECT_EQ(splitWork(74, 2, 2).cols, 1);
  // One row panel: split columns.
  EXPECT_EQ(splitWork(1, 32, 2).rows, 1);
  EXPECT_EQ(splitWork(1, 32, 2).cols, 2);
  // One thread: one task.
  EXPECT_EQ(splitWork(100, 100, 1).rows * splitWork(100, 100, 1).cols, 1);
  // Three row panels on four threads: rows and columns.
  const WorkSplit s = splitWork(3, 64, 4);
  EXPECT_LE(s.rows * s.cols, 4);
  EXPECT_GT(s.cols, 1);
}

// Every (row, column panel) of C is computed once, in blocks of at most an
// A block (a one-task grid: the whole), whatever the grid and
// however many threads the arena has (one thread runs every task in turn:
// the first takes its group's blocks, then the others').
TEST(GemmWorkSplit, SharesCoverEveryTileOnce) {
  const int64_t M = 200, colPanels = 9;
  const int panelRows = 14;
  for (int arenaThreads : {1, 2, 4})
    for (const WorkSplit grid : {WorkSplit{1, 1}, WorkSplit{2, 1}, WorkSplit{1, 2}, WorkSplit{2, 2}, WorkSplit{3, 1},
                                 WorkSplit{1, 4}}) {
      SCOPED_TRACE(testing::Message() << arenaThreads << " threads, grid " << grid.rows << "x" << grid.cols);
      std::vector<std::atomic<int>> seen(M * colPanels);
      tbb::task_arena arena(arenaThreads);
      arena.execute([&] {
        forEachShare(grid, colPanels, panelRows, M, 56, [&](const TaskShare& share) {
          EXPECT_FALSE(share.empty());
          if (grid.rows * grid.cols > 1) {
            EXPECT_LE(share.i1 - share.i0, 56);  // else the whole, in one call
          }
          for (int64_t i = share.i0; i < share.i1; ++i)
            for (int p = share.p0; p < share.p1; ++p) seen[i * colPanels + p].fetch_add(1);
        });
      });
      for (int64_t i = 0; i < M * colPanels; ++i) ASSERT_EQ(seen[i].load(), 1) << "row " << i / colPanels << ", panel " << i % colPanels;
    }
}

// Blocks of whole panels, none larger than an A block, cut at M, in a
// multiple of the threads, and the threads' halves within a panel of equal.
TEST(GemmWorkSplit, RowBlocksBalanceTheThreads) {
  struct Case {
    int64_t M;
    int panelRows;
    int64_t blockRows;
    int threads;
  };
  for (const Case& c : {Case{1024, 14, 56, 2}, Case{1008, 14, 56, 2}, Case{4096, 14, 56, 2}, Case{130, 14, 56, 2},
                        Case{20, 14, 56, 2}, Case{5, 14, 56, 2}, Case{1000, 16, 64, 3}, Case{777, 6, 48, 4},
                        Case{100, 32, 128, 8}}) {
    SCOPED_TRACE(testing::Message() << "M " << c.M << ", panels of " << c.panelRows << ", blocks of "
                                    << c.blockRows << ", " << c.threads << " threads");
    const RowBlocks blocks(c.M, c.panelRows, c.blockRows, c.threads);
    const int64_t panels = (c.M + c.panelRows - 1) / c.panelRows;
    ASSERT_GE(blocks.count, 1);
    EXPECT_LE(blocks.count, panels);
    if (panels >= c.threads) {
      EXPECT_EQ(blocks.count % c.threads, 0);
    }
    EXPECT_EQ(blocks.start(0), 0);
    EXPECT_EQ(blocks.start(blocks.count), c.M);
    for (int64_t b = 0; b < blocks.count; ++b) {
      const int64_t rows = blocks.start(b + 1) - blocks.start(b);
      EXPECT_GT(rows, 0) << "block " << b;
      EXPECT_LE(rows, c.blockRows) << "block " << b;
      if (b + 1 < blocks.count) {
        EXPECT_EQ(rows % c.panelRows, 0) << "block " << b;
      }
    }
    // Each thread's run of count / threads blocks (a static split; the
    // dynamic one steals whole blocks from it).
    if (blocks.count % c.threads == 0) {
      const int64_t per = blocks.count / c.threads;
      for (int t = 0; t < c.threads; ++t) {
        const int64_t rows = blocks.start((t + 1) * per) - blocks.start(t * per);
        EXPECT_NEAR(static_cast<double>(rows), static_cast<double>(c.M) / c.threads, c.panelRows) << "thread " << t;
      }
    }
  }
  // The bench's case: 1024 rows of 14-row panels on 2 threads, 518 and 506
  // rows, where blocks of 56 gave one thread 560.
  const RowBlocks even(1024, 14, 56, 2);
  EXPECT_EQ(even.count, 20);
  EXPECT_EQ(even.start(10), 518);
}

}  // namespace
}  // namespace kiln::interp::gemm
