// matmul: 2-D, batched with broadcast batch dims, 1-D operands, size-0
// extents, non-contiguous operands, every numeric dtype.
#include <array>
#include <bit>
#include <cmath>

#include "runtime/backends/Hal.h"
#include "runtime/interp/Interpreter.h"
#include "runtime/interp/OpLibrary.h"
#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

/// NumPy matmul in double. absSum receives sum |a||b| per output element.
Ref matmulRef(const Ref& a, const Ref& b, std::vector<double>* absSum) {
  Dims as = a.shape, bs = b.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Dims ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Dims batch = broadcastShape(ab, bb);
  Dims full = batch;
  full.push_back(M);
  full.push_back(N);
  Ref out(full);
  if (absSum) absSum->assign(out.v.size(), 0.0);
  int64_t nb = numelOf(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    Dims bidx = unravel(bi, batch);
    int64_t ao = broadcastSource(bidx, ab) * M * K, bo = broadcastSource(bidx, bb) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0, abs = 0;
        for (int64_t k = 0; k < K; ++k) {
          double p = a.v[ao + m * K + k] * b.v[bo + k * N + n];
          acc += p;
          abs += std::fabs(p);
        }
        int64_t o = (bi * M + m) * N + n;
        out.v[o] = acc;
        if (absSum) (*absSum)[o] = abs;
      }
  }
  Dims shape = batch;
  if (!aVec) shape.push_back(M);
  if (!bVec) shape.push_back(N);
  out.shape = shape;
  return out;
}

Range mmRange(DType t) {
  if (isFloat(t)) return {-2, 2};
  if (t == DType::i8 || t == DType::u8) return defaultRange(t);  // wraps
  return {-100, 100};
}

void checkMatmul(const Input& a, const Input& b, DType t) {
  SCOPED_TRACE("matmul(" + a.how + ", " + b.how + ")");
  Tensor y = kiln::matmul(a.t, b.t);
  EXPECT_DTYPE(y, t);
  std::vector<double> abs;
  Ref ref = matmulRef(a.r, b.r, &abs);
  int64_t K = a.r.shape.back();
  for (auto& e : abs) e *= accumEps(t) * std::sqrt(static_cast<double>(std::max<int64_t>(K, 1)));
  if (!isFloat(t)) ref = castRef(ref, t);
  EXPECT_TRUE(near(y, ref, tolFor(t), isFloat(t) ? &abs : nullptr));
}

void checkMatmulOnce(Rng& rng, DType t) {
  int64_t M = rng.randint(0, 6), K = rng.randint(0, 7), N = rng.randint(0, 6);
  if (rng.coin(0.8)) M = std::max<int64_t>(M, 1), K = std::max<int64_t>(K, 1), N = std::max<int64_t>(N, 1);
  auto [ba, bb] = randomBroadcastPair(rng, 2, 0.0);
  if (rng.coin(0.3)) ba.clear();
  if (rng.coin(0.3)) bb.clear();
  Dims sa = ba, sb = bb;
  int form = static_cast<int>(rng.randint(0, 5));  // 0: a is 1-D, 1: b is 1-D, 2: both, else matrices
  if (form == 0 || form == 2) sa = {K};
  else sa.push_back(M), sa.push_back(K);
  if (form == 1 || form == 2) sb = {K};
  else sb.push_back(K), sb.push_back(N);
  Input a = makeInput(rng, sa, t, mmRange(t)), b = makeInput(rng, sb, t, mmRange(t));
  checkMatmul(a, b, t);
}

TEST(OpsMatmul, RandomShapesFloat) {
  Rng rng(kSeed + 40);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 60; ++it) checkMatmulOnce(rng, t);
}

TEST(OpsMatmul, RandomShapesInteger) {
  Rng rng(kSeed + 41);
  for (DType t : kIntTypes)
    for (int it = 0; it < 30; ++it) checkMatmulOnce(rng, t);
}

TEST(OpsMatmul, TransposedOperandsAndLargerSizes) {
  Rng rng(kSeed + 42);
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{33, 70, 17}, {64, 128, 48}, {1, 257, 3}}) {
      // a^T and b^T given as transposed views of dense tensors.
      Ref at = randomRef(rng, {K, M}, t, {-1, 1}), bt = randomRef(rng, {N, K}, t, {-1, 1});
      Input a{kiln::transpose(makeTensor(at, t)), transposeRef(at, 0, 1), t, "transposed " + tname(t)};
      Input b{kiln::transpose(makeTensor(bt, t), 0, 1), transposeRef(bt, 0, 1), t, "transposed " + tname(t)};
      checkMatmul(a, b, t);
      Input c = makeInput(rng, {M, K}, t, {-1, 1}, Layout::Contiguous);
      checkMatmul(c, b, t);
    }
  }
}

TEST(OpsMatmul, ExplicitShapes) {
  Tensor v = kiln::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor w = kiln::from_vector(std::vector<float>{4, 5, 6}, {3});
  Tensor d = kiln::matmul(v, w);
  EXPECT_EQ(d.rank(), 0);
  EXPECT_EQ(d.item<double>(), 32);
  Tensor m = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // [2,3]
  EXPECT_TRUE(near(kiln::matmul(m, v), Ref({2}, {14, 32}), {}));
  EXPECT_TRUE(near(kiln::matmul(kiln::from_vector(std::vector<float>{1, -1}, {2}), m), Ref({3}, {-3, -3, -3}), {}));
  // Batch broadcasting: [2,1,2,3] @ [3,3,1] -> [2,3,2,1].
  Rng rng(kSeed + 43);
  Input a = makeInput(rng, {2, 1, 2, 3}, DType::f32, Layout::Contiguous);
  Input b = makeInput(rng, {3, 3, 1}, DType::f32, Layout::Broadcast);
  Tensor y = kiln::matmul(a.t, b.t);
  EXPECT_EQ(toDims(y.shape()), (Dims{2, 3, 2, 1}));
  checkMatmul(a, b, DType::f32);
  // K = 0 gives zeros; M = 0 gives an empty result.
  EXPECT_TRUE(near(kiln::matmul(kiln::ones({2, 0}), kiln::ones({0, 3})), Ref({2, 3}, 0.0), {}));
  EXPECT_TRUE(near(kiln::matmul(kiln::ones({0, 4}), kiln::ones({4, 3})), Ref({0, 3}), {}));
  // Integer wrapping: 100*100*2 = 20000 in i8.
  Tensor i = kiln::from_vector(std::vector<int8_t>{100, 100}, {1, 2});
  Tensor j = kiln::from_vector(std::vector<int8_t>{100, 100}, {2, 1});
  EXPECT_TRUE(near(kiln::matmul(i, j), Ref({1, 1}, {castTo(20000, DType::i8)}), {}));
}

TEST(OpsMatmul, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 500 + tid);
    for (int it = 0; it < 40; ++it) checkMatmulOnce(rng, rng.pick(kNumericTypes));
  });
  // Several threads multiply the same shared (materialized) inputs.
  Tensor shared = kiln::rand({40, 40}, 77);
  Ref sr({40, 40}, shared.to_vector<double>());
  std::vector<double> abs;
  Ref ref = matmulRef(sr, sr, &abs);
  for (auto& e : abs) e *= accumEps(DType::f32) * std::sqrt(40.0);
  runOnThreads(4, [&](int) {
    for (int k = 0; k < 5; ++k) EXPECT_TRUE(near(kiln::matmul(shared, shared), ref, tolFor(DType::f32), &abs));
  });
}

/// A product x @ w for the epilogue tests, and what it exercises.
struct EpilogueCase {
  kiln::Shape x, w;
  std::string how;
};

/// Random x for a case, with a NaN in one of its rows where it has more than 40 elements.
Tensor epilogueOperand(const kiln::Shape& shape, uint64_t seed) {
  Tensor x = kiln::randn(shape, seed);
  if (shape.numel() <= 40) return x;
  std::vector<float> xs = x.to_vector<float>();
  xs[static_cast<size_t>(2 * shape[shape.rank() - 1] + 1)] = std::nanf("");
  return kiln::from_vector(xs, shape);
}

/// The same values as `t` (rank >= 2) with the last two axes' strides
/// swapped: its rows are contiguous, not its columns.
Tensor columnsStrided(const Tensor& t) {
  std::vector<int> swap(static_cast<size_t>(t.shape().rank()));
  for (size_t d = 0; d < swap.size(); ++d) swap[d] = static_cast<int>(d);
  std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
  return kiln::permute(kiln::permute(t, swap).contiguous(), swap);
}

/// A fused result, the separate ops' result, and what they compute.
struct FusedCase {
  Tensor got, want;
  std::string what;
};

/// x @ w * 2 + bias + a residual whose last axis is strided is declined
/// (nothing fuses) and gives the separate ops' bits (`product`: x @ w, held).
void expectStridedResidualDeclined(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                                   const Tensor& product, const std::string& how) {
  const Tensor strided = columnsStrided(residual);
  const uint64_t before = kiln::interp::fusedMatmulEpilogues();
  const Tensor declined = kiln::matmul(x, w) * 2.0 + bias + strided;
  kiln::sync();
  EXPECT_EQ(kiln::interp::fusedMatmulEpilogues(), before) << how;
  expectSameTensorBits(declined, product * 2.0 + bias + residual, "x @ w * s + b + strided r, " + how);
}

/// A bias add along the last axis and a relu after a matmul run in the
/// GEMM's tile store when nothing else reads the product (the interpreter's
/// matmul epilogue, OpLibrary::matmulWithEpilogue): the same bits as the
/// separate ops, which a product kept alive (so not fused) gives; NaN stays
/// NaN through the relu. Batched products, [N], [1, N] and strided biases,
/// a relu alone, size-0 and empty-depth products.
TEST(OpsMatmul, BiasAndReluAfterAMatmulGiveTheBitsOfTheSeparateOps) {
  const std::vector<EpilogueCase> cases = {{{37, 19}, {19, 23}, "2-D"},
                                           {{3, 5, 19}, {19, 40}, "batched x, shared w"},
                                           {{2, 3, 16, 8}, {2, 3, 8, 33}, "rank-4 batch"},
                                           {{0, 7}, {7, 5}, "no rows"},
                                           {{6, 0}, {0, 5}, "empty depth"}};
  const auto same = expectSameTensorBits;
  // (kiln_op_tests_test_device runs on a library that fuses nothing.)
  const bool fuses = kiln::hal::deviceContext(kiln::default_device()).ops().fusesMatmulEpilogue(DType::f32, true);
  const uint64_t fusedPerBias = fuses ? 2 : 0, fusedReluOnly = fuses ? 1 : 0;
  uint64_t seed = 11;
  for (const EpilogueCase& c : cases) {
    const Tensor x = epilogueOperand(c.x, seed++), w = kiln::randn(c.w, seed++);
    const int64_t n = c.w[c.w.rank() - 1];
    const Tensor bias = kiln::randn({n}, seed++), rowBias = kiln::randn({1, n}, seed++);
    const Tensor strided = kiln::slice(kiln::randn({2 * n}, seed++), 0, 0, 2 * n, 2);
    const Tensor product = kiln::matmul(x, w);  // held: each op below reads it unfused
    for (const auto& [b, name] : std::vector<std::pair<Tensor, std::string>>{
             {bias, "[N] bias"}, {rowBias, "[1, N] bias"}, {strided, "strided bias"}}) {
      const std::string what = c.how + ", " + name;
      // (Statements of their own: a temporary alive at the flush holds its value.)
      const uint64_t fusedBefore = kiln::interp::fusedMatmulEpilogues();
      const Tensor fused = kiln::relu(kiln::matmul(x, w) + b);
      const Tensor biasFirst = b + kiln::matmul(x, w);
      kiln::sync();
      EXPECT_EQ(kiln::interp::fusedMatmulEpilogues() - fusedBefore, fusedPerBias) << what;
      same(fused, kiln::relu(product + b), "relu(x @ w + b), " + what);
      same(biasFirst, product + b, "b + x @ w, " + what);
    }
    const uint64_t fusedBefore = kiln::interp::fusedMatmulEpilogues();
    const Tensor reluOnly = kiln::relu(kiln::matmul(x, w));
    kiln::sync();
    EXPECT_EQ(kiln::interp::fusedMatmulEpilogues() - fusedBefore, fusedReluOnly) << c.how;
    same(reluOnly, kiln::relu(product), "relu(x @ w), " + c.how);
  }
}

/// A scale (a constant of one element), a bias, a residual (an operand of
/// the product's shape) and a relu after a matmul, in that order, run in
/// the GEMM's tile store on a library that takes them: the same bits as
/// the separate ops, NaN and -0 included. A prefix of that order fuses and
/// the rest runs as ops; a residual whose last axis is strided is declined
/// and the ops run one by one, with the same results. Unpacked and packed
/// products (two depth passes), residual rows 2N apart or broadcast.
TEST(OpsMatmul, ScaleAndResidualAfterAMatmulGiveTheBitsOfTheSeparateOps) {
  const std::vector<EpilogueCase> cases = {{{37, 19}, {19, 23}, "2-D"},
                                           {{3, 5, 19}, {19, 40}, "batched x, shared w"},
                                           {{2, 3, 16, 8}, {2, 3, 8, 33}, "rank-4 batch"},
                                           {{130, 1100}, {1100, 70}, "packed, two depth passes"},
                                           {{6, 0}, {0, 5}, "empty depth"}};
  const auto same = expectSameTensorBits;
  // (kiln_op_tests_test_device runs on a library that fuses nothing.)
  const auto& ops = kiln::hal::deviceContext(kiln::default_device()).ops();
  const uint64_t fusedEach = ops.fusesMatmulEpilogue(DType::f32, true) && ops.fusesMatmulScaleAndResidual(DType::f32);
  uint64_t seed = 101;
  for (const EpilogueCase& c : cases) {
    const Tensor x = epilogueOperand(c.x, seed++), w = kiln::randn(c.w, seed++);
    const kiln::Shape out = kiln::matmul(x, w).shape();
    const int64_t n = out[out.rank() - 1];
    const Tensor bias = kiln::randn({n}, seed++), residual = kiln::randn(out, seed++);
    // Residuals whose rows are not N apart: twice as far, or one row broadcast.
    kiln::Shape wide = out;
    wide[wide.rank() - 1] = 2 * n;
    const Tensor wideResidual = kiln::slice(kiln::randn(wide, seed++), out.rank() - 1, 0, n);
    const Tensor rowResidual = kiln::broadcast_to(kiln::randn({n}, seed++), out);
    const Tensor product = kiln::matmul(x, w);  // held: each op below reads it unfused
    const uint64_t fusedBefore = kiln::interp::fusedMatmulEpilogues();
    // (Statements of their own: a temporary alive at the flush holds its value.)
    std::vector<FusedCase> fused;
    fused.push_back({kiln::relu(kiln::matmul(x, w) * -0.375 + bias + residual),
                     kiln::relu(product * -0.375 + bias + residual), "relu(x @ w * s + b + r)"});
    fused.push_back({kiln::matmul(x, w) * 3.0, product * 3.0, "x @ w * s"});
    fused.push_back({0.25 * kiln::matmul(x, w) + wideResidual, 0.25 * product + wideResidual, "s * x @ w + r[:, :N]"});
    fused.push_back({kiln::matmul(x, w) + bias + rowResidual, product + bias + rowResidual,
                     "x @ w + b + broadcast row"});
    fused.push_back({residual + kiln::matmul(x, w), residual + product, "r + x @ w"});
    fused.push_back({kiln::relu(kiln::matmul(x, w) * 0.5 + residual), kiln::relu(product * 0.5 + residual),
                     "relu(x @ w * s + r)"});
    // The residual before the bias: only the residual fuses.
    fused.push_back({kiln::matmul(x, w) + residual + bias, product + residual + bias, "x @ w + r + b"});
    kiln::sync();
    EXPECT_EQ(kiln::interp::fusedMatmulEpilogues() - fusedBefore, fused.size() * fusedEach) << c.how;
    for (const FusedCase& f : fused) same(f.got, f.want, f.what + ", " + c.how);
    expectStridedResidualDeclined(x, w, bias, residual, product, c.how);
  }
}

/// The same epilogues after a bf16 matmul, on a library with bf16 GEMMs
/// that fuses them: each op rounds to bf16 as it does on its own (the
/// product, then the scale's, the bias's and the residual's results), so
/// the bits are those of the separate bf16 ops, -0 and infinities included
/// (a NaN as any NaN); a scale that bf16 does not hold (0.1) is the
/// constant's bf16 value. Unpacked and packed products, one with two depth
/// passes (summed in f32 first); strided, constant and broadcast operands;
/// a strided residual is declined.
TEST(OpsMatmul, Bf16EpilogueGivesTheBitsOfTheSeparateBf16Ops) {
  const std::vector<EpilogueCase> cases = {{{37, 19}, {19, 23}, "2-D"},
                                           {{3, 5, 19}, {19, 40}, "batched x, shared w"},
                                           {{2, 3, 16, 8}, {2, 3, 8, 33}, "rank-4 batch"},
                                           {{96, 256}, {256, 80}, "packed"},
                                           {{40, 1100}, {1100, 70}, "packed, two depth passes"},
                                           {{6, 0}, {0, 5}, "empty depth"}};
  const auto same = expectSameTensorBits;
  const auto& ops = kiln::hal::deviceContext(kiln::default_device()).ops();
  const uint64_t fusedEach = ops.fusesMatmulEpilogue(DType::bf16, true) && ops.fusesMatmulScaleAndResidual(DType::bf16);
  auto bf16 = [](const Tensor& t) { return kiln::cast(t, DType::bf16); };
  uint64_t seed = 301;
  for (const EpilogueCase& c : cases) {
    const Tensor x = bf16(epilogueOperand(c.x, seed++)), w = bf16(kiln::randn(c.w, seed++));
    const kiln::Shape out = kiln::matmul(x, w).shape();
    const int64_t n = out[out.rank() - 1];
    const Tensor bias = bf16(kiln::randn({n}, seed++)), residual = bf16(kiln::randn(out, seed++));
    const Tensor stridedBias = kiln::slice(bf16(kiln::randn({2 * n}, seed++)), 0, 0, 2 * n, 2);
    const Tensor constantBias = kiln::broadcast_to(kiln::full({1}, -0.0, DType::bf16), {n});  // stride 0, -0
    kiln::Shape wide = out;
    wide[wide.rank() - 1] = 2 * n;
    const Tensor wideResidual = kiln::slice(bf16(kiln::randn(wide, seed++)), out.rank() - 1, 0, n);
    const Tensor rowResidual = kiln::broadcast_to(bf16(kiln::randn({n}, seed++)), out);
    kiln::sync();
    const Tensor product = kiln::matmul(x, w);  // held: each op below reads it unfused
    const uint64_t fusedBefore = kiln::interp::fusedMatmulEpilogues();
    std::vector<FusedCase> fused;
    fused.push_back({kiln::relu(kiln::matmul(x, w) * -0.375 + bias + residual),
                     kiln::relu(product * -0.375 + bias + residual), "relu(x @ w * s + b + r)"});
    fused.push_back({kiln::matmul(x, w) * 0.1, product * 0.1, "x @ w * 0.1"});
    fused.push_back({kiln::relu(kiln::matmul(x, w) + stridedBias), kiln::relu(product + stridedBias),
                     "relu(x @ w + strided b)"});
    fused.push_back({0.25 * kiln::matmul(x, w) + wideResidual, 0.25 * product + wideResidual, "s * x @ w + r[:, :N]"});
    fused.push_back({kiln::relu(kiln::matmul(x, w)), kiln::relu(product), "relu(x @ w)"});
    fused.push_back({bias + kiln::matmul(x, w) + rowResidual, bias + product + rowResidual,
                     "b + x @ w + broadcast row"});
    fused.push_back({residual + kiln::matmul(x, w), residual + product, "r + x @ w"});
    // Rounds to infinity; -0 + -0 stays -0 where the product is -0.
    fused.push_back({kiln::matmul(x, w) * 3e38 + constantBias, product * 3e38 + constantBias, "x @ w * 3e38 + -0"});
    // The residual before the bias: only the residual fuses.
    fused.push_back({kiln::matmul(x, w) + residual + bias, product + residual + bias, "x @ w + r + b"});
    kiln::sync();
    EXPECT_EQ(kiln::interp::fusedMatmulEpilogues() - fusedBefore, fused.size() * fusedEach) << c.how;
    for (const FusedCase& f : fused) {
      EXPECT_EQ(f.got.dtype(), DType::bf16) << f.what;
      same(f.got, f.want, f.what + ", " + c.how);
    }
    expectStridedResidualDeclined(x, w, bias, residual, product, c.how);
  }
}

/// A cast from f16 or bf16 to f32 whose only reader is a matmul is left to
/// the matmul, whose packing widens the half values (OpLibrary::
/// matmulWidensHalf): the same bits as the product of the cast's f32
/// values, which a cast kept alive (so run on its own) gives. Either operand
/// or both, transposed, batched with a broadcast weight, packed (two depth
/// passes), with an epilogue after, empty; a cast read twice runs on its own.
TEST(OpsMatmul, CastFromAHalfTypeIntoAMatmulGivesTheBitsOfTheCastValues) {
  const std::vector<EpilogueCase> cases = {{{37, 19}, {19, 23}, "2-D"},
                                           {{3, 5, 19}, {19, 40}, "batched x, shared w"},
                                           {{2, 3, 16, 8}, {2, 3, 8, 33}, "rank-4 batch"},
                                           {{150, 300}, {300, 90}, "packed"},
                                           {{40, 1100}, {1100, 70}, "packed, two depth passes"},
                                           {{0, 7}, {7, 5}, "no rows"},
                                           {{6, 0}, {0, 5}, "empty depth"}};
  const auto same = expectSameTensorBits;
  const auto& ops = kiln::hal::deviceContext(kiln::default_device()).ops();
  const bool widens = ops.matmulWidensHalf(), fusesEpilogue = ops.fusesMatmulEpilogue(DType::f32, true);
  auto f32 = [](const Tensor& t) { return kiln::cast(t, DType::f32); };
  uint64_t seed = 501;
  for (DType half : {DType::bf16, DType::f16})
    for (const EpilogueCase& c : cases) {
      const std::string how = tname(half) + ", " + c.how;
      // Large values in x: f16 rounds some to infinity.
      const Tensor x = kiln::cast(epilogueOperand(c.x, seed++) * 3000.0, half);
      const Tensor w = kiln::cast(kiln::randn(c.w, seed++), half), wf = kiln::randn(c.w, seed++);
      const kiln::Shape out = kiln::matmul(f32(x), wf).shape();
      const Tensor bias = kiln::randn({out[out.rank() - 1]}, seed++);
      const Tensor xt = kiln::transpose(kiln::cast(kiln::randn({c.x[c.x.rank() - 1], c.x[c.x.rank() - 2]}, seed++), half), 0, 1);
      const Tensor xCast = f32(x), wCast = f32(w), xtCast = f32(xt);  // held: these casts run on their own
      kiln::sync();
      const uint64_t before = kiln::interp::castsIntoMatmuls(), fusedBefore = kiln::interp::fusedMatmulEpilogues();
      std::vector<FusedCase> folded;
      folded.push_back({kiln::matmul(f32(x), wf), kiln::matmul(xCast, wf), "cast(x) @ w"});
      folded.push_back({kiln::matmul(xCast, f32(w)), kiln::matmul(xCast, wCast), "x @ cast(w)"});
      folded.push_back({kiln::matmul(f32(x), f32(w)), kiln::matmul(xCast, wCast), "cast(x) @ cast(w)"});
      folded.push_back({kiln::relu(kiln::matmul(f32(x), wf) + bias), kiln::relu(kiln::matmul(xCast, wf) + bias),
                        "relu(cast(x) @ w + b)"});
      uint64_t folds = 5;
      if (c.x.rank() == 2) {
        folded.push_back({kiln::matmul(f32(xt), wf), kiln::matmul(xtCast, wf), "cast(x^T) @ w"});
        ++folds;
      }
      kiln::sync();
      EXPECT_EQ(kiln::interp::castsIntoMatmuls() - before, widens ? folds : 0) << how;
      if (widens && fusesEpilogue && c.x.rank() <= 3 && out.numel() > 0) {
        EXPECT_GE(kiln::interp::fusedMatmulEpilogues() - fusedBefore, 1u) << how << ": the epilogue still fuses";
      }
      for (const FusedCase& f : folded) {
        EXPECT_EQ(f.got.dtype(), DType::f32) << f.what;
        same(f.got, f.want, f.what + ", " + how);
      }
      // Read by the matmul and by a sum (no tensor holds the cast at the
      // flush): the cast runs on its own.
      const uint64_t twiceBefore = kiln::interp::castsIntoMatmuls();
      const Tensor readTwice = [&] {
        const Tensor t = f32(x);
        return kiln::matmul(t, wf) + kiln::sum(t);
      }();
      kiln::sync();
      EXPECT_EQ(kiln::interp::castsIntoMatmuls(), twiceBefore) << how;
      same(readTwice, kiln::matmul(xCast, wf) + kiln::sum(xCast), "cast read twice, " + how);
    }
}

TEST(OpsMatmul, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor a = kiln::ones({2, 3});
  Tensor b = kiln::ones({4, 2});
  Tensor pending = kiln::matmul(a, kiln::ones({3, 2}));
  expectKilnError([&] { return kiln::matmul(a, b); }, "matmul");
  expectKilnError([&] { return kiln::matmul(kiln::ones({2, 2, 3}), kiln::ones({3, 3, 2})); }, "matmul");
  expectKilnError([&] { return kiln::matmul(kiln::ones({3}), kiln::ones({4})); }, "matmul");
  EXPECT_TRUE(near(pending, Ref({2, 2}, 3.0), {}));
  EXPECT_TRUE(near(kiln::matmul(b, a), Ref({4, 3}, 2.0), {}));
}

}  // namespace
}  // namespace kt
