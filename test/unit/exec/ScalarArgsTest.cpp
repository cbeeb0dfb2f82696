// Scalar arguments: a float constant that changes from run to run (a decaying
// learning rate) becomes a kernel argument, so the step keeps one key and one
// kernel, with results bit-identical to the interpreter's. Needs libkiln_jit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/exec/ScalarArgs.h"
#include "test/unit/cache/CacheTestSupport.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

/// JitScope on a fresh engine (no profiles or scalar values from other tests:
/// they share structures), stats reset.
class FreshMode {
 public:
  explicit FreshMode(JitMode mode, int64_t threshold = 2, int64_t maxShapes = -1) : jit_(mode, threshold) {
    exec::Engine::instance().resetProfilesForTesting();
    exec::KernelCache::instance().clearMemory();
    saved_ = settings().max_shapes;
    if (maxShapes >= 0) {
      Settings s = settings();
      s.max_shapes = maxShapes;
      set_settings(s);
    }
    reset_stats();
  }
  ~FreshMode() {
    exec::Engine::instance().drainCompiles();
    Settings s = settings();
    s.max_shapes = saved_;
    set_settings(s);
  }

 private:
  JitScope jit_;
  int64_t saved_;
};

std::vector<float> wave(int64_t n, float scale, float phase = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale + phase);
  return v;
}

/// Bitwise equality of float vectors (NaNs with equal bits are equal).
void expectBitEqual(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << what << " " << i << ": " << got[i] << " vs " << want[i];
}

enum class Opt { Sgd, Adam, AdamW };

struct TrainRun {
  std::vector<float> losses;  ///< one per step
  std::vector<float> params;  ///< all parameters after the last step
};

/// A small MLP regression trained for `steps` steps with a learning rate that
/// decays every step (set_lr), one flushed trace per step; `batchOf(step)`
/// gives each step's batch size.
TrainRun train(Opt which, int steps, const std::function<int64_t(int)>& batchOf = [](int) { return int64_t{16}; }) {
  Tensor w1 = from_vector(wave(8 * 12, 0.37f), {8, 12});
  Tensor b1 = from_vector(wave(12, 1.3f, 0.2f), {12});
  Tensor w2 = from_vector(wave(12 * 4, 0.71f), {12, 4});
  std::vector<Tensor*> params{&w1, &b1, &w2};
  std::unique_ptr<optim::Optimizer> opt;
  if (which == Opt::Sgd) {
    optim::SGDOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    opt = std::make_unique<optim::SGD>(params, o);
  } else if (which == Opt::Adam) {
    optim::AdamOptions o;
    o.lr = 0.01;
    opt = std::make_unique<optim::Adam>(params, o);
  } else {
    opt = std::make_unique<optim::AdamW>(params);
  }
  const double lr0 = opt->lr();
  std::vector<Tensor> losses;
  for (int s = 0; s < steps; ++s) {
    const int64_t batch = batchOf(s);
    Tensor x = from_vector(wave(batch * 8, 0.11f, static_cast<float>(s % 7)), {batch, 8});
    Tensor y = from_vector(wave(batch * 4, 0.23f, static_cast<float>(s % 5)), {batch, 4});
    opt->set_lr(lr0 * std::pow(0.99, s));
    Tensor pred = matmul(relu(matmul(x, w1) + b1), w2);
    Tensor loss = mean(square(pred - y));
    loss.backward();
    opt->step();
    losses.push_back(loss);
    kiln::step();
  }
  TrainRun r;
  for (const Tensor& l : losses) r.losses.push_back(l.item<float>());
  for (Tensor* p : params)
    for (float v : p->to_vector<float>()) r.params.push_back(v);
  return r;
}

TrainRun interpreted(Opt which, int steps, const std::function<int64_t(int)>& batchOf = [](int) { return int64_t{16}; }) {
  FreshMode off(JitMode::Off);
  return train(which, steps, batchOf);
}

void expectTiersUpOnce(Opt which) {
  constexpr int kSteps = 200;
  const TrainRun want = interpreted(which, kSteps);
  FreshMode m(JitMode::Sync);
  // A few steps in: the step compiled once (the first steps differ in every
  // constant at once, and run interpreted).
  TrainRun early = train(which, 10);
  Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  const auto [profiles, structures] = exec::Engine::instance().profileCountsForTesting();
  // The rest of the run reuses that kernel: no compilation, every step compiled.
  exec::Engine::instance().resetProfilesForTesting();
  exec::KernelCache::instance().clearMemory();
  reset_stats();
  const TrainRun got = train(which, kSteps);
  s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_GE(s.compiled_runs, static_cast<uint64_t>(kSteps - 3)) << s.str();
  EXPECT_LE(s.distinct_trace_keys, 3u) << s.str();
  EXPECT_EQ(exec::Engine::instance().profileCountsForTesting(), std::make_pair(profiles, structures));
  expectBitEqual(got.losses, want.losses, "loss");
  expectBitEqual(got.params, want.params, "parameter");
}

TEST(ScalarArgs, SgdWithDecayingLearningRateTiersUpOnce) { expectTiersUpOnce(Opt::Sgd); }
TEST(ScalarArgs, AdamWithDecayingLearningRateTiersUpOnce) { expectTiersUpOnce(Opt::Adam); }
TEST(ScalarArgs, AdamWWithDecayingLearningRateTiersUpOnce) { expectTiersUpOnce(Opt::AdamW); }

TEST(ScalarArgs, ProfilesPlateauInEveryMode) {
  for (JitMode mode : {JitMode::Off, JitMode::Async, JitMode::Sync}) {
    FreshMode m(mode);
    train(Opt::Adam, 20);
    exec::Engine::instance().drainCompiles();
    const auto after20 = exec::Engine::instance().profileCountsForTesting();
    const uint64_t keys = stats().distinct_trace_keys;
    train(Opt::Adam, 300);
    exec::Engine::instance().drainCompiles();
    // train() builds new parameters, so its first steps run again, but no
    // profile and no structure is added by the 300 learning rates.
    EXPECT_EQ(exec::Engine::instance().profileCountsForTesting(), after20) << to_string(mode);
    EXPECT_EQ(stats().distinct_trace_keys, keys) << to_string(mode);
    EXPECT_LE(keys, 4u) << to_string(mode);
  }
}

/// y = x * a + b, one trace: a and b are scalar slots.
std::vector<float> affine(float a, float b) {
  Tensor x = from_vector(wave(64, 0.3f), {8, 8});
  std::vector<float> r = (x * a + b).to_vector<float>();
  kiln::step();
  return r;
}

TEST(ScalarArgs, SlotsBecomeArgumentsWhenTheyVaryAndStay) {
  std::vector<std::pair<float, float>> values;
  for (int i = 0; i < 6; ++i) values.emplace_back(2.0f, 1.0f);    // constant: folded in
  for (int i = 0; i < 6; ++i) values.emplace_back(0.5f + i, 1.0f); // a varies
  for (int i = 0; i < 6; ++i) values.emplace_back(3.0f, 0.25f * i); // then b
  std::vector<std::vector<float>> want;
  {
    FreshMode off(JitMode::Off);
    for (auto [a, b] : values) want.push_back(affine(a, b));
  }
  FreshMode m(JitMode::Sync);
  std::vector<uint64_t> compilesAfter;
  for (size_t i = 0; i < values.size(); ++i) {
    expectBitEqual(affine(values[i].first, values[i].second), want[i], "affine");
    compilesAfter.push_back(stats().compiles);
  }
  // One kernel with both constants folded, one with a as an argument, one
  // with both: each compiled on its key's second run.
  EXPECT_EQ(compilesAfter[5], 1u);
  EXPECT_EQ(compilesAfter[11], 2u);
  EXPECT_EQ(compilesAfter[17], 3u);
  EXPECT_EQ(stats().compiled_runs, 5u + 5u + 5u) << stats().str();  // each key's first run is interpreted
  EXPECT_EQ(stats().distinct_trace_keys, 3u) << stats().str();
  // Back to the first values: their own kernel (constants folded) runs.
  const uint64_t runs = stats().compiled_runs;
  expectBitEqual(affine(2.0f, 1.0f), want[0], "affine");
  EXPECT_EQ(stats().compiles, 3u);
  EXPECT_EQ(stats().compiled_runs, runs + 1);
  EXPECT_EQ(stats().distinct_trace_keys, 3u);
}

/// x * a in `dtype`, read back as f32.
std::vector<float> scaled(DType dtype, double a) {
  Tensor x = cast(from_vector(wave(40, 0.7f), {5, 8}), dtype);
  std::vector<float> r = cast(x * a, DType::f32).to_vector<float>();
  kiln::step();
  return r;
}

TEST(ScalarArgs, EveryFloatDtypeTakesItsScalarArgument) {
  const std::vector<double> values{0.1, 0.37, -2.5, 1e-3, 3.0, 1.0 / 3.0};
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<std::vector<float>> want;
    {
      FreshMode off(JitMode::Off);
      for (double a : values) want.push_back(scaled(dtype, a));
    }
    FreshMode m(JitMode::Sync);
    for (size_t i = 0; i < values.size(); ++i) expectBitEqual(scaled(dtype, values[i]), want[i], "x * a");
    Stats s = stats();
    EXPECT_EQ(s.compiles, 1u) << s.str();
    EXPECT_EQ(s.compiled_runs, values.size() - 2) << s.str();
  }
}

/// The mean over the rows of a [rows, 8] input: its 1 / rows is a slot.
std::vector<float> rowMean(int64_t rows) {
  Tensor x = from_vector(wave(rows * 8, 0.3f, static_cast<float>(rows)), {rows, 8});
  std::vector<float> r = mean(relu(x) * 1.5f, {0}).to_vector<float>();
  kiln::step();
  return r;
}

TEST(ScalarArgs, AKeyCompiledBeforeItsConstantsVariedKeepsItsKernel) {
  // Epochs of five full batches and a smaller last one.
  std::vector<int64_t> rows;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 5; ++i) rows.push_back(16);
    rows.push_back(8);
  }
  std::vector<std::vector<float>> want;
  {
    FreshMode off(JitMode::Off);
    for (int64_t r : rows) want.push_back(rowMean(r));
  }
  FreshMode m(JitMode::Sync);
  for (size_t i = 0; i < rows.size(); ++i) expectBitEqual(rowMean(rows[i]), want[i], "mean");
  // The full batch's kernel (1/16 folded in) keeps running after the last
  // batch made 1/rows an argument; the last batch gets the kernel with it.
  Stats s = stats();
  EXPECT_EQ(s.compiles, 2u) << s.str();
  EXPECT_EQ(s.distinct_trace_keys, 2u) << s.str();
  EXPECT_EQ(s.interpreted_runs, 2u) << s.str();  // the first full and the first last batch
}

TEST(ScalarArgs, PowExponentsAndIntegerConstantsStayInTheKey) {
  FreshMode m(JitMode::Sync);
  Tensor x = from_vector(wave(32, 0.3f, 2.0f), {32});
  std::vector<trace::TraceKey> keys;
  for (float e : {2.0f, 3.0f, 0.5f, 2.0f}) {
    Tensor y = pow(abs(x), e);
    y.to_vector<float>();
    keys.push_back(exec::Engine::lastKey());
    kiln::step();
  }
  EXPECT_FALSE(keys[0] == keys[1]);
  EXPECT_FALSE(keys[1] == keys[2]);
  EXPECT_TRUE(keys[0] == keys[3]);
  Tensor i = arange(0, 16, 1, DType::i64);
  std::vector<trace::TraceKey> intKeys;
  for (int64_t k : {3, 4}) {
    (i * k).to_vector<int64_t>();
    intKeys.push_back(exec::Engine::lastKey());
    kiln::step();
  }
  (i * int64_t{5}).to_vector<int64_t>();
  EXPECT_FALSE(intKeys[0] == intKeys[1]);
  EXPECT_FALSE(intKeys[1] == exec::Engine::lastKey());
}

TEST(ScalarArgs, ReplayFindsTheKernelByStructure) {
  cachetest::TempDir dir;
  constexpr int kSteps = 8;
  const TrainRun want = interpreted(Opt::Sgd, kSteps);
  {
    cachetest::CacheMode m(JitMode::Sync, 2, dir.str());
    cachetest::CacheMode::freshProcess();
    reset_stats();
    expectBitEqual(train(Opt::Sgd, kSteps).losses, want.losses, "sync loss");
    EXPECT_EQ(stats().compiles, 1u) << stats().str();
    EXPECT_GE(stats().cache_stores, 1u) << stats().str();
  }
  // A new process replays with the same schedule: its lr values differ from
  // run to run, but the kernel is keyed on the structure alone.
  cachetest::CacheMode m(JitMode::Replay, 2, dir.str());
  cachetest::CacheMode::freshProcess();
  reset_stats();
  const TrainRun got = train(Opt::Sgd, kSteps);
  Stats s = stats();
  EXPECT_EQ(s.compiles + s.region_compiles, 0u) << s.str();
  EXPECT_GE(s.cache_disk_hits, 1u) << s.str();
  EXPECT_EQ(s.replay_misses, 0u) << s.str();
  // Step 1 (its constants' first values: not yet kernel arguments) has no
  // whole-trace kernel; the others run the cached one. (The momentum
  // buffers start as zeros, so step 1 has the structure of every step.)
  EXPECT_EQ(s.compiled_runs, static_cast<uint64_t>(kSteps - 1)) << s.str();
  expectBitEqual(got.losses, want.losses, "replay loss");
  expectBitEqual(got.params, want.params, "replay parameter");
}

TEST(ScalarArgs, DynamicShapeKernelTakesScalarArguments) {
  constexpr int kSteps = 24;
  auto batchOf = [](int s) { return int64_t{8 + 4 * (s % 4)}; };  // 8, 12, 16, 20
  const TrainRun want = interpreted(Opt::Sgd, kSteps, batchOf);
  FreshMode m(JitMode::Sync, 2, /*maxShapes=*/1);
  const TrainRun got = train(Opt::Sgd, kSteps, batchOf);
  Stats s = stats();
  expectBitEqual(got.losses, want.losses, "loss");
  expectBitEqual(got.params, want.params, "parameter");
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, static_cast<uint64_t>(kSteps - 8)) << s.str();
  EXPECT_LE(s.compiles, 3u) << s.str();
}

TEST(ScalarArgs, HotRegionsDoNotHoldTheValues) {
  constexpr int kSteps = 12;
  const TrainRun want = interpreted(Opt::Adam, kSteps);
  FreshMode m(JitMode::Sync);
  exec::Engine::instance().setTraceCompilesForTesting(false);
  const TrainRun got = train(Opt::Adam, kSteps);
  exec::Engine::instance().setTraceCompilesForTesting(true);
  Stats s = stats();
  EXPECT_GT(s.region_compiles, 0u) << s.str();
  EXPECT_GT(s.mixed_runs, 0u) << s.str();
  expectBitEqual(got.losses, want.losses, "loss");
  expectBitEqual(got.params, want.params, "parameter");
}

TEST(ScalarArgsTable, WidensOnlyOnNewValues) {
  exec::ScalarArgs table;
  EXPECT_EQ(table.note(7, {1, 2, 3}), nullptr);
  EXPECT_EQ(table.note(7, {1, 2, 3}), nullptr);
  bool widened = false;
  auto args = table.note(7, {1, 5, 3}, &widened);
  ASSERT_NE(args, nullptr);
  EXPECT_TRUE(widened);
  EXPECT_EQ(*args, (exec::ArgSlots{0, 1, 0}));
  EXPECT_EQ(table.note(7, {1, 9, 3}, &widened), args);  // an argument's value: nothing new
  EXPECT_FALSE(widened);
  auto wider = table.note(7, {4, 9, 3}, &widened);
  EXPECT_TRUE(widened);
  EXPECT_EQ(*wider, (exec::ArgSlots{1, 1, 0}));
  EXPECT_EQ(table.note(7, {1, 2}), nullptr);  // another slot count (a hash collision)
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace kiln
