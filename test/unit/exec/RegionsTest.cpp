// Hot regions: the partitioning rule, and traces that never repeat (or
// alternate) running their recurring parts on compiled region kernels, with
// results equal to the interpreter's. Needs libkiln_jit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "kiln/kiln.h"
#include "runtime/backends/Hal.h"
#include "runtime/exec/Engine.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/exec/Regions.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

using core::OpKind;

// ---------------------------------------------------------------- the rule

/// Builds traces node by node (what the recorder would record).
struct TraceBuilder {
  trace::Trace t;
  uint32_t add(OpKind op, Shape shape, std::vector<uint32_t> ins, std::vector<int64_t> attrs = {}) {
    trace::Node n{};
    n.op = op;
    n.dtype = DType::f32;
    n.shape = shape;
    n.numInputs = static_cast<uint16_t>(ins.size());
    n.inputs = static_cast<uint32_t>(t.operands.size());
    t.operands.insert(t.operands.end(), ins.begin(), ins.end());
    n.numAttrs = static_cast<uint16_t>(attrs.size());
    n.attrs = static_cast<uint32_t>(t.attrs.size());
    t.attrs.insert(t.attrs.end(), attrs.begin(), attrs.end());
    t.nodes.push_back(n);
    t.holders.push_back(nullptr);
    return static_cast<uint32_t>(t.nodes.size() - 1);
  }
  uint32_t param(Shape shape) {
    uint32_t id = add(OpKind::Param, shape, {});
    t.nodes[id].i0 = static_cast<int64_t>(t.params.size());
    trace::Param p;
    p.view.storage =
        core::Storage::allocate(hal::hostAllocator(), static_cast<size_t>(std::max<int64_t>(shape.numel(), 1)) * 4);
    core::contiguousStrides(shape, p.view.strides);
    t.params.push_back(p);
    return id;
  }
  void live(uint32_t id) { t.holders[id] = reinterpret_cast<detail::TensorImpl*>(this); }
  exec::RegionPlan plan() {
    std::vector<uint8_t> needed;
    std::vector<uint32_t> lastUse;
    t.liveness(needed, lastUse);
    return exec::partitionRegions(t, exec::neededNodes(needed));
  }
};

/// h = tanh(h @ W + slice(xs, t) @ U + b) for `steps` steps; `inputFirst`
/// records `x_t @ U` before `h @ W` (as a compiler evaluating operands right
/// to left would).
TraceBuilder recurrentTrace(int steps, bool inputFirst = false) {
  TraceBuilder b;
  const int64_t B = 2, H = 3, D = 4;
  uint32_t h = b.param({B, H}), W = b.param({H, H}), U = b.param({D, H}), bias = b.param({H});
  uint32_t xs = b.param({64, B, D});
  for (int t = 0; t < steps; ++t) {
    uint32_t hw = inputFirst ? 0 : b.add(OpKind::Matmul, {B, H}, {h, W});
    uint32_t xt = b.add(OpKind::Slice, {1, B, D}, {xs}, {t, 0, 0, 1, 1, 1});
    uint32_t x2 = b.add(OpKind::Reshape, {B, D}, {xt});
    uint32_t xu = b.add(OpKind::Matmul, {B, H}, {x2, U});
    if (inputFirst) hw = b.add(OpKind::Matmul, {B, H}, {h, W});
    uint32_t s = b.add(OpKind::Add, {B, H}, {hw, xu});
    uint32_t sb = b.add(OpKind::Add, {B, H}, {s, bias});
    h = b.add(OpKind::Tanh, {B, H}, {sb});
  }
  b.live(h);
  return b;
}

/// Every needed node runs exactly once, after the values it reads.
void expectValidSchedule(const TraceBuilder& b, const exec::RegionPlan& plan) {
  std::vector<uint8_t> needed;
  std::vector<uint32_t> lastUse;
  b.t.liveness(needed, lastUse);
  std::vector<uint32_t> ids = exec::neededNodes(needed);
  ASSERT_EQ(plan.order.size(), ids.size());
  std::vector<int> position(b.t.nodes.size(), -1);
  for (size_t i = 0; i < plan.order.size(); ++i) {
    ASSERT_EQ(position[ids[plan.order[i]]], -1) << "node scheduled twice";
    position[ids[plan.order[i]]] = static_cast<int>(i);
  }
  for (uint32_t id : ids)
    for (uint32_t in : b.t.inputsOf(b.t.nodes[id])) EXPECT_LT(position[in], position[id]);
  // Steps tile the order.
  uint32_t at = 0;
  for (const exec::RegionStep& s : plan.steps) {
    EXPECT_EQ(s.begin, at);
    at = s.end;
  }
  EXPECT_EQ(at, plan.order.size());
}

TEST(RegionPartition, OneRegionPerRecurrentStepWithTheSameKey) {
  TraceBuilder b = recurrentTrace(5);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  ASSERT_EQ(plan.regions.size(), 5u);
  EXPECT_EQ(plan.keyedRegions, 5u);
  for (const exec::Region& r : plan.regions) {
    // matmul, matmul, add, add, tanh: the slice and its reshape are loose.
    EXPECT_EQ(r.ops, 5u);
    EXPECT_EQ(r.inputs.size(), 5u);  // h, W, x_t, U, b
    EXPECT_EQ(r.outputs.size(), 1u);
    EXPECT_TRUE(r.key == plan.regions[0].key) << "the slice offset must not enter the key";
  }
}

/// A collective (not lowered: a Collective row) is in no region: it closes
/// the region before it, runs after it and after the loose views it reads,
/// and what reads it is in a later region.
TEST(RegionPartition, CollectivesRunBetweenRegions) {
  TraceBuilder b;
  uint32_t x = b.param({4, 3}), w = b.param({3, 3});
  uint32_t e = b.add(OpKind::Exp, {4, 3}, {x});
  uint32_t g = b.add(OpKind::Matmul, {4, 3}, {e, w});
  uint32_t flat = b.add(OpKind::Reshape, {12}, {g});
  uint32_t part = b.add(OpKind::Slice, {6}, {x}, {0, 2});  // loose: a view of an outside value
  uint32_t r1 = b.add(OpKind::AllReduce, {12}, {flat});
  uint32_t r2 = b.add(OpKind::AllReduce, {6}, {b.add(OpKind::Reshape, {12}, {x})});
  uint32_t t = b.add(OpKind::Tanh, {12}, {r1});
  uint32_t s = b.add(OpKind::Add, {6}, {r2, b.add(OpKind::Slice, {6}, {t}, {0, 1})});
  (void)part;
  b.live(s);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  std::vector<uint8_t> needed;
  std::vector<uint32_t> lastUse;
  b.t.liveness(needed, lastUse);
  const std::vector<uint32_t> ids = exec::neededNodes(needed);
  for (const exec::Region& r : plan.regions)
    for (uint32_t q : r.nodes) EXPECT_NE(b.t.nodes[ids[q]].op, OpKind::AllReduce) << "a collective in a region";
  // The region before (exp, matmul, reshape) and the one after (tanh, add, ...).
  ASSERT_GE(plan.regions.size(), 2u);
  auto regionOf = [&](uint32_t id) {
    for (size_t ri = 0; ri < plan.regions.size(); ++ri)
      for (uint32_t q : plan.regions[ri].nodes)
        if (ids[q] == id) return static_cast<int>(ri);
    return -1;
  };
  EXPECT_EQ(regionOf(e), regionOf(g));
  EXPECT_GE(regionOf(e), 0);
  EXPECT_GT(regionOf(t), regionOf(g));
  EXPECT_EQ(regionOf(t), regionOf(s));
}

TEST(RegionPartition, OperandOrderDoesNotShiftTheStepRegions) {
  TraceBuilder b = recurrentTrace(6, /*inputFirst=*/true);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  ASSERT_EQ(plan.regions.size(), 6u);
  for (const exec::Region& r : plan.regions) {
    EXPECT_EQ(r.ops, 5u);
    EXPECT_TRUE(r.key == plan.regions[0].key);
  }
}

TEST(RegionPartition, AScalarConstantSharedByEveryStepKeepsTheStepsAlike) {
  // h = tanh(h @ W) * 0.5 with the recorder's one node for 0.5, recorded in
  // the first step and read by all: it runs loose, before the first region,
  // and every step's region reads it alike.
  TraceBuilder b;
  const int64_t B = 2, H = 3;
  uint32_t h = b.param({B, H}), W = b.param({H, H});
  uint32_t half = 0;
  for (int t = 0; t < 4; ++t) {
    uint32_t hw = b.add(OpKind::Matmul, {B, H}, {h, W});
    uint32_t th = b.add(OpKind::Tanh, {B, H}, {hw});
    if (t == 0) {
      half = b.add(OpKind::Full, {}, {});
      b.t.nodes[half].f0 = 0.5;
    }
    h = b.add(OpKind::Mul, {B, H}, {th, half});
  }
  b.live(h);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  ASSERT_EQ(plan.regions.size(), 4u);
  for (const exec::Region& r : plan.regions) {
    EXPECT_EQ(r.ops, 3u);
    EXPECT_EQ(r.inputs.size(), 3u);  // h, W, the constant
    EXPECT_EQ(r.outputs.size(), 1u);
    EXPECT_TRUE(r.key == plan.regions[0].key);
  }
}

TEST(RegionPartition, RegionKeysDoNotDependOnTheTripCount) {
  exec::RegionPlan a = recurrentTrace(3).plan(), b = recurrentTrace(7).plan();
  EXPECT_TRUE(a.regions[0].key == b.regions[0].key);
  EXPECT_TRUE(a.regions[2].key == b.regions[6].key);
}

TEST(RegionPartition, LongElementwiseChainsAreCapped) {
  TraceBuilder b;
  uint32_t x = b.param({8});
  for (int i = 0; i < 130; ++i) x = b.add(i % 2 ? OpKind::Exp : OpKind::Neg, {8}, {x});
  b.live(x);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  ASSERT_EQ(plan.regions.size(), (130 + exec::kMaxRegionNodes - 1) / exec::kMaxRegionNodes);
  for (const exec::Region& r : plan.regions) EXPECT_LE(r.ops, exec::kMaxRegionNodes);
  // Values passed between regions are outputs of one and inputs of the next.
  EXPECT_EQ(plan.regions[1].inputs.size(), 1u);
  EXPECT_EQ(plan.regions[0].outputs.size(), 1u);
}

TEST(RegionPartition, ViewsOfOutsideValuesOtherThanSlicesJoinTheRegion) {
  TraceBuilder b;
  uint32_t x = b.param({4, 3}), w = b.param({4, 3});
  uint32_t wt = b.add(OpKind::Permute, {3, 4}, {w}, {1, 0});
  uint32_t y = b.add(OpKind::Matmul, {4, 4}, {x, wt});
  b.live(y);
  exec::RegionPlan plan = b.plan();
  expectValidSchedule(b, plan);
  ASSERT_EQ(plan.regions.size(), 1u);
  EXPECT_EQ(plan.regions[0].ops, 2u) << "the kernel reads W itself, transposed";
}

TEST(RegionPartition, ConstantsAloneAreNotKeyed) {
  TraceBuilder b;
  uint32_t c = b.add(OpKind::Full, {4}, {});
  b.live(c);
  exec::RegionPlan plan = b.plan();
  ASSERT_EQ(plan.regions.size(), 1u);
  EXPECT_FALSE(plan.regions[0].keyed);
  EXPECT_EQ(plan.keyedRegions, 0u);
}

// ---------------------------------------------------------------- tiering

std::vector<float> hostData(int64_t n, float scale, float phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale + phase);
  return v;
}

struct Recurrent {
  static constexpr int64_t kB = 4, kH = 16, kD = 8, kMaxSteps = 40;
  Tensor W = from_vector(hostData(kH * kH, 0.37f, 0.1f), {kH, kH}) * 0.3f;
  Tensor U = from_vector(hostData(kD * kH, 0.21f, 0.5f), {kD, kH}) * 0.3f;
  Tensor b = from_vector(hostData(kH, 0.9f, 0.2f), {kH}) * 0.1f;
  Tensor h0 = from_vector(hostData(kB * kH, 0.13f, 0.7f), {kB, kH});
  Tensor xs = from_vector(hostData(kMaxSteps * kB * kD, 0.05f, 0.3f), {kMaxSteps, kB, kD});
  /// Each step's result is scaled by this scalar (an operand, one node in
  /// the trace for all steps), unless 1.
  float scale = 1;
  /// And raised to this power (a scalar exponent), unless 1.
  float power = 1;
  Recurrent() { kiln::sync(); }

  /// Runs `steps` steps; one trace, whose length is the trip count.
  std::vector<float> run(int steps) const {
    Tensor h = h0;
    for (int t = 0; t < steps; ++t) {
      Tensor xt = reshape(slice(xs, 0, t, t + 1), {kB, kD});
      h = tanh(matmul(h, W) + matmul(xt, U) + b);
      if (scale != 1) h = h * scale;
      if (power != 1) h = pow(h, power);
    }
    std::vector<float> r = h.to_vector<float>();
    step();
    return r;
  }
};

void expectClose(const std::vector<float>& a, const std::vector<float>& b, float tol = 2e-5f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << i;
}

/// Forgets profiles and in-memory kernels: as if the process had just started
/// (the disk cache is off in tests).
void freshProcess() {
  exec::Engine::instance().resetProfilesForTesting();
  exec::KernelCache::instance().clearMemory();
}

/// Trip counts that never repeat: no whole trace is ever seen twice.
std::vector<int> tripCounts() { return {11, 7, 23, 5, 17, 31, 9, 26, 13, 38}; }

/// Runs the loop at every trip count of tripCounts() interpreted, then
/// (after freshProcess) compiled in sync mode, each run matching the
/// interpreted one; the compiled runs' stats, and their total step count.
std::pair<Stats, uint64_t> runInterpretedThenCompiled(const Recurrent& net) {
  std::vector<std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    reset_stats();
    for (int n : tripCounts()) reference.push_back(net.run(n));
    EXPECT_EQ(stats().mixed_runs, 0u) << "KILN_JIT=off: no regions";
    EXPECT_EQ(stats().region_compiles, 0u);
  }
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  uint64_t steps = 0;
  std::vector<int> counts = tripCounts();
  for (size_t i = 0; i < counts.size(); ++i) {
    expectClose(net.run(counts[i]), reference[i]);
    steps += static_cast<uint64_t>(counts[i]);
  }
  return {stats(), steps};
}

TEST(HotRegions, VaryingTripCountRunsTheBodyOnARegionKernel) {
  const auto [s, steps] = runInterpretedThenCompiled(Recurrent());
  EXPECT_EQ(s.compiles, 0u) << "no trace repeats" << s.str();
  EXPECT_EQ(s.compiled_runs, 0u) << s.str();
  EXPECT_EQ(s.region_compiles, 1u) << "one body, compiled once" << s.str();
  EXPECT_EQ(s.region_compile_failures, 0u) << s.str();
  // The body occurs many times in the first trace: hot at once (sync mode
  // compiles it before that run), so every step of every trace ran compiled.
  EXPECT_EQ(s.mixed_runs, tripCounts().size()) << s.str();
  EXPECT_EQ(s.region_launches, steps) << s.str();
  EXPECT_GT(s.compiled_op_share(), 0.5) << s.str();
  EXPECT_NE(s.str().find("region_compiles 1"), std::string::npos);
}

void expectOneRegionKernel(const Recurrent& net) {
  const auto [s, steps] = runInterpretedThenCompiled(net);
  EXPECT_EQ(s.region_compiles, 1u) << "one body, compiled once" << s.str();
  EXPECT_EQ(s.region_launches, steps) << s.str();
}

TEST(HotRegions, AScalarInTheBodyStillGivesOneRegionKernel) {
  // Every step multiplies by 0.9: one constant node for all of them, which
  // must not make the first step's region differ from the others'.
  Recurrent net;
  net.scale = 0.9f;
  expectOneRegionKernel(net);
}

TEST(HotRegions, AScalarExponentInTheBodyStillGivesOneRegionKernel) {
  // pow(h, 2): each step's exponent is its own node, in its own region.
  Recurrent net;
  net.power = 2;
  expectOneRegionKernel(net);
}

/// The recurrent loop at batch size `batch` (rows of h0 and of each x_t).
std::vector<float> runBatch(const Recurrent& net, int steps, int64_t batch) {
  Tensor h = slice(net.h0, 0, 0, batch);
  for (int t = 0; t < steps; ++t) {
    Tensor xt = reshape(slice(slice(net.xs, 0, t, t + 1), 1, 0, batch), {batch, Recurrent::kD});
    h = tanh(matmul(h, net.W) + matmul(xt, net.U) + net.b);
  }
  std::vector<float> r = h.to_vector<float>();
  step();
  return r;
}

/// Trip counts and batch sizes that both vary: the body's region key
/// changes with the batch, so past KILN_MAX_SHAPES (2) batch sizes its
/// structure gets one dynamic-shape region kernel, which serves the later
/// sizes; every run matches the interpreter.
TEST(HotRegions, RegionsAtManyBatchSizesShareADynamicShapeKernel) {
  Recurrent net;
  const std::vector<std::pair<int, int64_t>> runs = {{11, 4}, {7, 1}, {23, 3}, {5, 2}, {17, 4},
                                                     {9, 1},  {26, 3}, {13, 2}, {6, 4}};
  std::vector<std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    for (auto [steps, batch] : runs) reference.push_back(runBatch(net, steps, batch));
  }
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  Settings saved = settings(), s = saved;
  s.max_shapes = 2;
  set_settings(s);
  reset_stats();
  uint64_t launchesAfterThird = 0, stepsAfterThird = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const uint64_t before = stats().region_launches;
    expectClose(runBatch(net, runs[i].first, runs[i].second), reference[i]);
    if (i >= 3) {
      launchesAfterThird += stats().region_launches - before;
      stepsAfterThird += static_cast<uint64_t>(runs[i].first);
    }
  }
  const Stats st = stats();
  set_settings(saved);
  EXPECT_EQ(st.compile_failures + st.region_compile_failures, 0u) << st.str();
  // Batch sizes 4 and 1: a region kernel each; batch 3, the third shape:
  // the dynamic-shape kernel (counted as a trace compile), then no more.
  EXPECT_EQ(st.region_compiles, 2u) << st.str();
  EXPECT_EQ(st.compiles, 1u) << st.str();
  // From the fourth run on every step of the body ran compiled.
  EXPECT_EQ(launchesAfterThird, stepsAfterThird) << st.str();
}

/// The dynamic-shape region kernel of the test above, stored in a disk
/// cache, serves a replaying process (nothing compiled) at batch sizes no
/// process compiled for.
TEST(HotRegions, ReplayRunsRegionsOfNewShapesOnTheCachedDynamicShapeKernel) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-region-dyn-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Recurrent net;
  const std::vector<std::pair<int, int64_t>> compiled = {{11, 4}, {7, 1}, {23, 3}};
  const std::vector<std::pair<int, int64_t>> replayed = {{9, 2}, {13, 3}, {6, 4}, {17, 1}};
  std::vector<std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    for (auto [steps, batch] : replayed) reference.push_back(runBatch(net, steps, batch));
  }
  auto withCache = [&](Settings s) {
    s.cache = "on";
    s.cache_dir = dir.string();
    s.max_shapes = 2;
    set_settings(s);
  };
  freshProcess();
  {
    JitScope sync(JitMode::Sync, 2);
    withCache(settings());
    reset_stats();
    for (auto [steps, batch] : compiled) runBatch(net, steps, batch);
    const Stats st = stats();
    ASSERT_EQ(st.compiles, 1u) << "the dynamic-shape region kernel: " << st.str();
    ASSERT_EQ(st.region_compiles, 2u) << st.str();
  }
  freshProcess();
  JitScope replay(JitMode::Replay, 2);
  withCache(settings());
  reset_stats();
  uint64_t steps = 0;
  for (size_t i = 0; i < replayed.size(); ++i) {
    expectClose(runBatch(net, replayed[i].first, replayed[i].second), reference[i]);
    steps += static_cast<uint64_t>(replayed[i].first);
  }
  const Stats st = stats();
  EXPECT_EQ(st.compiles + st.region_compiles, 0u) << st.str();
  // Batch 2, which no process compiled for, from the dynamic-shape kernel;
  // 3 and 4 from it or from their own static kernels; 1 from its own.
  EXPECT_EQ(st.region_launches, steps) << st.str();
  freshProcess();
  fs::remove_all(dir);
}

TEST(HotRegions, AsyncRegionKernelsAreUsedOnceReady) {
  Recurrent net;
  std::vector<std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    for (int n : tripCounts()) reference.push_back(net.run(n + 1));
  }
  freshProcess();
  JitScope async(JitMode::Async, 2);
  reset_stats();
  std::vector<int> counts = tripCounts();
  expectClose(net.run(counts[0] + 1), reference[0]);  // hot: compiling in the background
  exec::Engine::instance().drainCompiles();
  uint64_t steps = 0;
  for (size_t i = 1; i < counts.size(); ++i) {
    expectClose(net.run(counts[i] + 1), reference[i]);
    steps += static_cast<uint64_t>(counts[i] + 1);
  }
  Stats s = stats();
  EXPECT_EQ(s.region_compiles, 1u) << s.str();
  EXPECT_EQ(s.compiles, 0u) << s.str();
  EXPECT_EQ(s.region_launches, steps) << s.str();
}

TEST(HotRegions, ReplayUsesCachedRegionKernelsOnly) {
  Recurrent net;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = net.run(12);
  }
  freshProcess();
  {
    // Replay never compiles: with nothing cached, regions stay interpreted.
    JitScope replay(JitMode::Replay, 2);
    reset_stats();
    expectClose(net.run(12), reference);
    EXPECT_EQ(stats().region_compiles, 0u);
    EXPECT_EQ(stats().mixed_runs, 0u);
  }
  {
    JitScope sync(JitMode::Sync, 2);
    net.run(9);  // a region kernel for the body, in this process's kernel cache
  }
  exec::Engine::instance().resetProfilesForTesting();  // a "new process" with the cache warm
  JitScope replay(JitMode::Replay, 2);
  reset_stats();
  expectClose(net.run(12), reference);
  EXPECT_EQ(stats().region_compiles, 0u);
  EXPECT_EQ(stats().region_launches, 12u) << stats().str();
}

TEST(HotRegions, RepeatingTracesAreCompiledWholeNotAsRegions) {
  Recurrent net;
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  // One step a trace: the body occurs once per trace, and the trace repeats.
  for (int i = 0; i < 4; ++i) net.run(1);
  Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.region_compiles, 0u) << "a recurring trace is compiled as one unit" << s.str();
  EXPECT_EQ(s.compiled_runs, 3u) << s.str();
}

TEST(HotRegions, WholeTraceKernelIsPreferredOverRegions) {
  Recurrent net;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = net.run(6);
  }
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  expectClose(net.run(6), reference);  // first run of this trace: regions only
  EXPECT_EQ(stats().mixed_runs, 1u);
  expectClose(net.run(6), reference);  // second: the whole trace is hot, tier 2
  expectClose(net.run(6), reference);
  Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compiled_runs, 2u) << s.str();
  EXPECT_EQ(s.mixed_runs, 1u) << s.str();
}

TEST(HotRegions, IndexOutOfRangeInACompiledRegionIsReported) {
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  Tensor table = from_vector(hostData(5 * 3, 0.4f, 0.0f), {5, 3});
  Tensor m = from_vector(hostData(3 * 3, 0.7f, 0.2f), {3, 3});
  kiln::sync();
  // Each step gathers rows by an index from host data (a region input) and
  // the trip count varies, so only regions tier up.
  auto run = [&](const std::vector<std::vector<int64_t>>& steps) {
    Tensor acc = zeros({2, 3});
    for (const auto& ids : steps) {
      Tensor idx = cast(from_vector<int64_t>(ids, {2}), DType::i32);
      acc = tanh(matmul(acc, m) + index_select(table * 2.0f, 0, idx));
    }
    return acc;
  };
  std::vector<float> ok = run({{0, 1}, {2, 3}, {4, 0}, {1, 1}, {2, 2}, {0, 4}}).to_vector<float>();
  step();
  std::vector<float> expect;
  {
    JitScope off(JitMode::Off);
    expect = run({{0, 1}, {2, 3}, {4, 0}, {1, 1}, {3, 2}}).to_vector<float>();
    step();
  }
  expectClose(run({{0, 1}, {2, 3}, {4, 0}, {1, 1}, {3, 2}}).to_vector<float>(), expect);
  step();
  EXPECT_EQ(ok.size(), 6u);
  EXPECT_THROW(run({{0, 1}, {2, 9}, {4, 0}}).to_vector<float>(), Error);
  step();
  EXPECT_GT(stats().region_launches, 0u);
}

// ---------------------------------------------------------------- alternating traces

/// A small MLP trained with Adam; every `logEvery`-th step reads the loss in
/// the middle of the step (a flush), so two trace shapes alternate: the plain
/// step, and forward / backward+update split at the read.
struct Trainer {
  Tensor w1 = from_vector(hostData(12 * 16, 0.31f, 0.1f), {12, 16}) * 0.2f, b1 = zeros({16});
  Tensor w2 = from_vector(hostData(16 * 16, 0.17f, 0.4f), {16, 16}) * 0.2f, b2 = zeros({16});
  Tensor w3 = from_vector(hostData(16 * 4, 0.23f, 0.9f), {16, 4}) * 0.2f, b3 = zeros({4});
  Tensor x = from_vector(hostData(32 * 12, 0.11f, 0.3f), {32, 12});
  Tensor y = from_vector<int64_t>(std::vector<int64_t>(32, 2), {32});
  std::unique_ptr<optim::Adam> opt;
  std::vector<float> logged;
  Trainer() {
    w1.requires_grad();
    b1.requires_grad();
    w2.requires_grad();
    b2.requires_grad();
    w3.requires_grad();
    b3.requires_grad();
    kiln::sync();
    opt = std::make_unique<optim::Adam>(std::vector<Tensor*>{&w1, &b1, &w2, &b2, &w3, &b3},
                                        optim::AdamOptions{.lr = 1e-2});
  }
  void trainStep(int i) {
    Tensor h = relu(matmul(x, w1) + b1);
    h = relu(matmul(h, w2) + b2);
    Tensor loss = cross_entropy(matmul(h, w3) + b3, y);
    if (i % 5 == 4) logged.push_back(loss.item<float>());
    loss.backward();
    opt->step();
    kiln::step();
  }
  std::vector<float> weights() const {
    std::vector<float> all;
    for (const Tensor* t : {&w1, &b1, &w2, &b2, &w3, &b3}) {
      std::vector<float> v = t->to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

TEST(HotRegions, TrainingStepThatLogsEveryFifthIterationTiersUpBoth) {
  constexpr int kSteps = 20;
  std::vector<float> refWeights, refLogged;
  {
    JitScope off(JitMode::Off);
    Trainer t;
    for (int i = 0; i < kSteps; ++i) t.trainStep(i);
    refWeights = t.weights();
    refLogged = t.logged;
  }
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  Trainer t;
  reset_stats();
  for (int i = 0; i < kSteps; ++i) {
    Stats before = stats();
    t.trainStep(i);
    Stats after = stats();
    if (i % 5 != 4 && i >= 1) {
      // The plain step records one trace from its first run (the optimizer
      // state starts as buffers): a whole-trace kernel from its second.
      EXPECT_EQ(after.interpreted_ops, before.interpreted_ops) << "step " << i << "\n" << after.str();
      EXPECT_GT(after.compiled_runs, before.compiled_runs) << "step " << i;
    }
    if (i >= 10) {
      // The logging step's two traces recurred too (at i = 9): every step
      // runs as whole-trace kernels.
      EXPECT_EQ(after.interpreted_ops, before.interpreted_ops) << "step " << i << "\n" << after.str();
      EXPECT_GT(after.compiled_runs, before.compiled_runs) << "step " << i;
    }
  }
  Stats s = stats();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_EQ(s.region_compile_failures, 0u) << s.str();
  // The plain step and the logging step's two traces.
  EXPECT_GE(s.compiles, 3u) << s.str();
  expectClose(t.logged, refLogged, 1e-4f);
  expectClose(t.weights(), refWeights, 1e-4f);
}

TEST(HotRegions, ATrainingLoopCompilesItsStepWholeAndNoneOfItsRegions) {
  // The step records one trace from its first run (the optimizer state
  // starts as buffers), so it is compiled whole at its second run and none
  // of its regions (Adam repeats one update per equal-shaped parameter) is.
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  Trainer t;
  reset_stats();
  for (int i : {0, 1, 2, 3, 5, 6}) t.trainStep(i);  // never a logging step
  Stats s = stats();
  EXPECT_EQ(s.region_compiles, 0u) << s.str();
  EXPECT_EQ(s.mixed_runs, 0u) << s.str();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compiled_runs, 5u) << s.str();
}

TEST(HotRegions, RegionsOfATraceThatMayRecurWaitForItsWholeKernel) {
  // A logging step first (its forward part and the rest: two traces), then
  // plain steps: the plain step's first run finds its forward regions seen
  // in another trace, but they are a small part of a trace that may recur;
  // they wait, and the step, recurring, is compiled whole.
  freshProcess();
  JitScope sync(JitMode::Sync, 2);
  Trainer t;
  reset_stats();
  for (int i : {4, 0, 1, 2, 3}) t.trainStep(i);
  Stats s = stats();
  EXPECT_GT(s.regions_deferred, 0u) << s.str();
  EXPECT_EQ(s.region_compiles, 0u) << s.str();
  EXPECT_EQ(s.mixed_runs, 0u) << s.str();
  EXPECT_EQ(s.compiled_runs, 3u) << s.str();
}

}  // namespace
}  // namespace kiln
