// Dynamic-shape kernels: a trace structure seen with more than
// KILN_MAX_SHAPES shapes gets one kernel whose varying extents are dynamic,
// instead of one kernel per shape. Needs libkiln_jit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"
#include "runtime/cache/KernelCache.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/exec/RandomOpChain.h"

namespace kiln {
namespace {

/// JitScope plus KILN_MAX_SHAPES, on a fresh engine (no profiles from other
/// tests: they share structures).
class DynamicMode {
 public:
  DynamicMode(JitMode mode, int64_t maxShapes, int64_t threshold = 2) : jit_(mode, threshold) {
    exec::Engine::instance().resetProfilesForTesting();
    exec::KernelCache::instance().clearMemory();
    Settings s = settings();
    saved_ = s.max_shapes;
    s.max_shapes = maxShapes;
    set_settings(s);
    reset_stats();
  }
  ~DynamicMode() {
    exec::Engine::instance().drainCompiles();
    Settings s = settings();
    s.max_shapes = saved_;
    set_settings(s);
  }

 private:
  JitScope jit_;
  int64_t saved_;
};

std::vector<float> floats(int64_t n, float scale, float phase = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale + phase);
  return v;
}

/// Distance in units in the last place (same sign, finite).
int64_t ulps(float a, float b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b) || (a < 0) != (b < 0)) return INT64_MAX;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

/// Compiled and interpreted floats agree to a few ULP (near zero, where
/// cancellation makes ULPs meaningless, to 1e-6 absolute).
void expectUlpClose(const std::vector<float>& got, const std::vector<float>& want, int64_t maxUlps = 64) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-6f) {
      EXPECT_LE(ulps(got[i], want[i]), maxUlps) << i << ": " << got[i] << " vs " << want[i];
    }
}

struct Mlp {
  Tensor w1 = from_vector(floats(16 * 8, 0.37f), {16, 8});
  Tensor b1 = from_vector(floats(8, 1.3f, 0.2f), {8});
  Tensor w2 = from_vector(floats(8 * 5, 0.71f), {8, 5});
};

/// An MLP-like step: matmuls, a broadcast bias, activations, softmax (max and
/// sum reductions over the features) and a sum over the batch.
std::pair<std::vector<float>, std::vector<float>> mlpStep(const Mlp& m, int64_t batch) {
  Tensor x = from_vector(floats(batch * 16, 0.11f, static_cast<float>(batch)), {batch, 16});
  Tensor h = relu(matmul(x, m.w1) + m.b1);
  Tensor y = matmul(h, m.w2);
  Tensor perRow = sum(softmax(y, 1) * y, {1});
  Tensor perFeature = sum(tanh(h) * 0.5f, {0});
  auto r = std::make_pair(perRow.to_vector<float>(), perFeature.to_vector<float>());
  step();
  return r;
}

std::pair<std::vector<float>, std::vector<float>> mlpReference(const Mlp& m, int64_t batch) {
  JitScope off(JitMode::Off);
  return mlpStep(m, batch);
}

TEST(DynamicShapes, LoopOverBatchSizesEndsOnOneDynamicKernel) {
  Mlp m;
  kiln::sync();
  std::vector<std::pair<std::vector<float>, std::vector<float>>> want;
  for (int64_t batch = 1; batch <= 24; ++batch) want.push_back(mlpReference(m, batch));
  DynamicMode mode(JitMode::Sync, 3);
  // Each size twice (threshold 2): sizes 1-3 get static kernels, size 4 is
  // the structure's fourth shape and gets the dynamic kernel, which serves
  // every later size from its first run.
  uint64_t compilesAfterDynamic = 0;
  for (int64_t batch = 1; batch <= 24; ++batch) {
    for (int rep = 0; rep < 2; ++rep) {
      auto got = mlpStep(m, batch);
      expectUlpClose(got.first, want[batch - 1].first);
      expectUlpClose(got.second, want[batch - 1].second);
    }
    if (batch == 4) compilesAfterDynamic = stats().compiles;
    if (batch >= 4) {
      EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled) << batch;
    }
  }
  Stats s = stats();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_EQ(compilesAfterDynamic, 4u) << "three static kernels and one dynamic one";
  EXPECT_EQ(s.compiles, 4u) << "sizes 5-24 reuse the dynamic kernel: " << s.str();
  // Sizes 1-3: first run interpreted, second compiled; sizes 4-24: compiled.
  EXPECT_EQ(s.interpreted_runs, 3u) << s.str();
  EXPECT_EQ(s.compiled_runs, 3u + 2u * 21u) << s.str();
}

TEST(DynamicShapes, LargeBatchesRunInParallelAndAgree) {
  Mlp m;
  kiln::sync();
  DynamicMode mode(JitMode::Sync, 2, 1);
  for (int64_t batch : {3, 5, 7}) mlpStep(m, batch);
  const uint64_t compiles = stats().compiles;
  for (int64_t batch : {4096, 1000, 3000}) {
    auto want = mlpReference(m, batch);
    auto got = mlpStep(m, batch);
    expectUlpClose(got.first, want.first);
    expectUlpClose(got.second, want.second, 256);  // a sum over thousands of rows
  }
  EXPECT_EQ(stats().compiles, compiles);
}

/// Integer elementwise ops with broadcasting and reductions: bit-exact.
std::pair<std::vector<int64_t>, std::vector<int32_t>> intStep(int64_t batch) {
  std::vector<int32_t> xs(static_cast<size_t>(batch * 5)), row(5);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int32_t>((i * 7919 + static_cast<size_t>(batch)) % 201) - 100;
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<int32_t>(i * 3) - 4;
  Tensor x = from_vector(xs, {batch, 5});
  Tensor r = from_vector(row, {5});
  Tensor y = x * 3 - r;                              // broadcast over the batch
  Tensor masked = where(y > 0, y, -y);               // select
  Tensor perRow = sum(masked * masked, {1});         // i64 sums, one per row
  Tensor perColumn = max(cast(y, DType::i32), {0});  // over the batch
  auto out = std::make_pair(perRow.to_vector<int64_t>(), perColumn.to_vector<int32_t>());
  step();
  return out;
}

TEST(DynamicShapes, IntegersAreBitExact) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> want;
  {
    JitScope off(JitMode::Off);
    for (int64_t batch = 1; batch <= 12; ++batch) want.push_back(intStep(batch));
  }
  DynamicMode mode(JitMode::Sync, 4, 1);
  for (int64_t batch = 1; batch <= 12; ++batch) {
    auto got = intStep(batch);
    EXPECT_EQ(got.first, want[batch - 1].first) << batch;
    EXPECT_EQ(got.second, want[batch - 1].second) << batch;
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled) << batch;
  }
  EXPECT_EQ(stats().compiles, 5u) << stats().str();
  EXPECT_EQ(stats().compiled_runs, 12u);
}

/// Batched matmul with a broadcast operand, permute, a reshape whose target
/// has the batch size, leaves of the batch's shape (ones, rand), a static
/// slice: all with a dynamic batch.
std::vector<float> shapeStep(int64_t batch) {
  Tensor x = from_vector(floats(batch * 12, 0.23f, static_cast<float>(batch)), {batch, 3, 4});
  Tensor w = from_vector(floats(4 * 5, 0.61f), {4, 5});
  Tensor y = matmul(x, w);                                    // [b, 3, 5]
  Tensor z = reshape(permute(y, {0, 2, 1}), {batch, 15});     // [b, 15]
  Tensor mask = cast(rand({batch, 15}, 7) > 0.5f, DType::f32);
  Tensor r = sum(z * mask + ones({batch, 15}) * 0.25f, {1});  // [b]
  Tensor picked = slice(z, 1, 2, 14, 3);                      // [b, 4]
  std::vector<float> out = r.to_vector<float>();
  std::vector<float> more = picked.to_vector<float>();
  out.insert(out.end(), more.begin(), more.end());
  step();
  return out;
}

/// A reshape between ranks whose every extent varies ([a, b, c, d, e] to
/// [e, d, c, b, a, 1]): its kernel collapses the dynamic input to one
/// dimension and expands it again, a chain MLIR 22's
/// expand-strided-metadata crashed on (kResolveDynamicReshapes).
std::vector<int32_t> reshapeStep(int64_t k) {
  const int64_t a = k % 3 + 1, b = k % 2 + 2, c = 2, d = k % 4 + 1, e = k % 5 + 1;
  std::vector<int32_t> v(static_cast<size_t>(a * b * c * d * e));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7 + k);
  Tensor x = from_vector(v, {a, b, c, d, e});
  std::vector<int32_t> out = (reshape(x, {e, d, c, b, a, 1}) + 1).to_vector<int32_t>();
  step();
  return out;
}

TEST(DynamicShapes, ReshapeBetweenRanksOfDynamicExtentsCompiles) {
  std::vector<std::vector<int32_t>> want;
  {
    JitScope off(JitMode::Off);
    for (int64_t k = 0; k < 12; ++k) want.push_back(reshapeStep(k));
  }
  DynamicMode mode(JitMode::Sync, 4, 1);
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(reshapeStep(k), want[static_cast<size_t>(k)]) << k;
  EXPECT_EQ(stats().compile_failures, 0u) << stats().str();
  EXPECT_GT(stats().compiled_runs, 4u) << stats().str();
}

TEST(DynamicShapes, ShapeOpsLeavesAndBatchedMatmulAgree) {
  std::vector<std::vector<float>> want;
  {
    JitScope off(JitMode::Off);
    for (int64_t batch = 1; batch <= 9; ++batch) want.push_back(shapeStep(batch));
  }
  DynamicMode mode(JitMode::Sync, 2, 1);
  for (int64_t batch = 1; batch <= 9; ++batch) {
    expectUlpClose(shapeStep(batch), want[batch - 1]);
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled) << batch;
  }
  EXPECT_EQ(stats().compiles, 3u) << stats().str();
  EXPECT_EQ(stats().compile_failures, 0u);
}

/// randomOpChain on [batch, f] inputs, f from 2 to 6 by seed; its result and
/// its rows' sums of squares.
std::vector<float> randomProgram(uint64_t seed, int64_t batch) {
  std::mt19937_64 rng(seed);
  const int64_t f = 2 + static_cast<int64_t>(seed % 5);
  Tensor x = from_vector(floats(batch * f, 0.37f, static_cast<float>(batch)), {batch, f});
  Tensor bias = from_vector(floats(f, 0.9f), {f});
  Tensor w = from_vector(floats(f * f, 0.21f), {f, f});
  const Tensor h = randomOpChain(rng, x, bias, w);
  Tensor perRow = sum(h * h, {1});  // pending with h: one trace
  std::vector<float> out = h.to_vector<float>();
  std::vector<float> rows = perRow.to_vector<float>();
  out.insert(out.end(), rows.begin(), rows.end());
  step();
  return out;
}

TEST(DynamicShapes, RandomProgramsAgreeAtEverySize) {
  uint64_t seeds = 12;
  if (const char* env = std::getenv("KILN_FUZZ_ITERATIONS")) seeds = std::strtoull(env, nullptr, 10);
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    std::vector<std::vector<float>> want;
    {
      JitScope off(JitMode::Off);
      for (int64_t batch = 1; batch <= 8; ++batch) want.push_back(randomProgram(seed, batch));
    }
    DynamicMode mode(JitMode::Sync, 3, 1);
    for (int64_t batch = 1; batch <= 8; ++batch) {
      std::vector<float> got = randomProgram(seed, batch);
      ASSERT_EQ(got.size(), want[batch - 1].size());
      for (size_t i = 0; i < got.size(); ++i) {
        const float a = got[i], b = want[batch - 1][i];
        if (std::fabs(a - b) > 1e-5f * (1 + std::fabs(b)))
          ADD_FAILURE() << "seed " << seed << " batch " << batch << " element " << i << ": " << a << " vs " << b;
      }
    }
    Stats s = stats();
    EXPECT_EQ(s.compile_failures, 0u) << "seed " << seed << ": " << s.str();
    EXPECT_EQ(s.compiles, 4u) << "seed " << seed << ": three static kernels, one dynamic: " << s.str();
    EXPECT_EQ(s.compiled_runs, 8u) << "seed " << seed;
  }
}

TEST(DynamicShapes, AShapeThatDoesNotFitStaysInterpretedAndCorrect) {
  DynamicMode mode(JitMode::Sync, 2, 1);
  auto run = [](int64_t batch, int64_t features) {
    Tensor x = from_vector(floats(batch * features, 0.3f), {batch, features});
    Tensor b = from_vector(floats(features, 0.9f), {features});
    std::vector<float> r = sum(exp(x - b), {1}).to_vector<float>();
    step();
    return r;
  };
  for (int64_t batch : {2, 3, 4, 5}) run(batch, 6);
  const uint64_t compiles = stats().compiles;
  EXPECT_EQ(compiles, 3u) << "two static kernels, then the dynamic one";
  // Same structure, but the feature axis (static in the kernel) differs.
  std::vector<float> got = run(7, 9);
  EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::InterpretOnly);
  std::vector<float> want;
  {
    JitScope off(JitMode::Off);
    want = run(7, 9);
  }
  EXPECT_EQ(got, want) << "the interpreter ran it";
  EXPECT_EQ(stats().compiles, compiles) << "no recompilation";
  // A fitting size still runs the dynamic kernel.
  run(11, 6);
  EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled);
  EXPECT_EQ(stats().compiles, compiles);
}

TEST(DynamicShapes, StructureWithoutADynamicKernelKeepsTheStormGuard) {
  DynamicMode mode(JitMode::Sync, 3, 1);
  // concat along the batch axis cannot have dynamic extents: the structure
  // keeps static kernels for its first three sizes and interprets the rest.
  for (int64_t batch = 1; batch <= 6; ++batch) {
    Tensor x = from_vector(floats(batch * 4, 0.5f), {batch, 4});
    std::vector<float> got = concat({x * 2.0f, x}, 0).to_vector<float>();
    std::vector<float> xs = x.to_vector<float>();
    ASSERT_EQ(got.size(), xs.size() * 2);
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_EQ(got[i], xs[i] * 2.0f);
      EXPECT_EQ(got[xs.size() + i], xs[i]);
    }
    step();
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()),
              batch <= 3 ? exec::Tier::Compiled : exec::Tier::InterpretOnly)
        << batch;
  }
  EXPECT_EQ(stats().compiles, 3u) << stats().str();
  EXPECT_EQ(stats().compile_failures, 0u);
}

TEST(DynamicShapes, ConvolutionsKeepStaticKernelsAndStayCorrect) {
  // conv2d has no dynamic-shape lowering: a loop over batch sizes compiles
  // static kernels for the first sizes and interprets the rest, with no
  // compile failure and the interpreter's results.
  Tensor w = from_vector(floats(4 * 3 * 3 * 3, 0.23f), {4, 3, 3, 3});
  kiln::sync();
  auto run = [&](int64_t batch) {
    Tensor x = from_vector(floats(batch * 3 * 6 * 5, 0.17f, static_cast<float>(batch)), {batch, 3, 6, 5});
    Conv2dOptions o;
    o.padding = {1};
    std::vector<float> r = relu(conv2d(x, w, {}, o) * 0.5f).to_vector<float>();
    step();
    return r;
  };
  std::vector<std::vector<float>> want;
  {
    JitScope off(JitMode::Off);
    for (int64_t batch = 1; batch <= 6; ++batch) want.push_back(run(batch));
  }
  DynamicMode mode(JitMode::Sync, 3, 1);
  for (int64_t batch = 1; batch <= 6; ++batch) {
    expectUlpClose(run(batch), want[batch - 1]);
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()),
              batch <= 3 ? exec::Tier::Compiled : exec::Tier::InterpretOnly)
        << batch;
  }
  EXPECT_EQ(stats().compiles, 3u) << stats().str();
  EXPECT_EQ(stats().compile_failures, 0u) << stats().str();
}

TEST(DynamicShapes, AsyncModeSwitchesOnceTheKernelIsReady) {
  Mlp m;
  kiln::sync();
  DynamicMode mode(JitMode::Async, 2);
  for (int64_t batch = 1; batch <= 3; ++batch) mlpStep(m, batch);
  exec::Engine::instance().drainCompiles();
  const uint64_t compiles = stats().compiles;
  EXPECT_EQ(compiles, 1u) << "the third shape queued the dynamic kernel: " << stats().str();
  for (int64_t batch = 4; batch <= 9; ++batch) {
    auto want = mlpReference(m, batch);
    auto got = mlpStep(m, batch);
    expectUlpClose(got.first, want.first);
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled) << batch;
  }
  EXPECT_EQ(stats().compiles, compiles);
}

TEST(DynamicShapes, DiskCacheKeepsTheDynamicKernelApartReloadsAndReplaysIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-dyn-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Mlp m;
  kiln::sync();
  auto run = [&](const char* what) {
    DynamicMode mode(JitMode::Sync, 2, 1);
    Settings s = settings();
    s.cache = "on";
    s.cache_dir = dir.string();
    set_settings(s);
    for (int64_t batch : {2, 3, 6, 10}) mlpStep(m, batch);
    EXPECT_EQ(exec::Engine::instance().tierOf(exec::Engine::lastKey()), exec::Tier::Compiled) << what;
    return stats();
  };
  Stats first = run("first process");
  EXPECT_EQ(first.compiles, 3u) << first.str();
  EXPECT_EQ(first.cache_stores, 3u) << "two static kernels and the dynamic one, in separate entries";
  Stats second = run("second process");
  EXPECT_EQ(second.compiles, 0u) << second.str();
  EXPECT_EQ(second.cache_disk_hits, 3u) << second.str();
  // A replaying process, at sizes no process has seen: the dynamic kernel is
  // found by its structure and runs from the first step, nothing compiles.
  {
    DynamicMode mode(JitMode::Replay, 2, 1);
    Settings s = settings();
    s.cache = "on";
    s.cache_dir = dir.string();
    set_settings(s);
    for (int64_t batch : {5, 7, 23}) {
      auto want = mlpReference(m, batch);
      const uint64_t before = stats().compiled_runs;
      auto got = mlpStep(m, batch);
      EXPECT_EQ(stats().compiled_runs, before + 1) << "batch " << batch;
      expectUlpClose(got.first, want.first);
      expectUlpClose(got.second, want.second);
    }
    Stats replayed = stats();
    EXPECT_EQ(replayed.compiles, 0u) << replayed.str();
    EXPECT_EQ(replayed.replay_misses, 0u) << replayed.str();
    EXPECT_GE(replayed.cache_disk_hits, 1u) << replayed.str();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
