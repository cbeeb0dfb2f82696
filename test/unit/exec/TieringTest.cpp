// Tiering: hot traces are compiled and the switch is invisible except for
// speed. Needs libkiln_jit (built with KILN_BUILD_COMPILER).
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <tuple>

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/exec/TrainingStep.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/exec/Engine.h"
#include "runtime/exec/WarmStart.h"
#include "runtime/support/HostCaches.h"
#include "runtime/support/Log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <tbb/global_control.h>

namespace kiln {
namespace {


struct Data {
  Tensor x = rand({37, 19}, 1, DType::f32, -1, 1);
  Tensor w = rand({19, 23}, 2, DType::f32, -1, 1);
  Tensor b = rand({23}, 3, DType::f32, -1, 1);
  Data() { kiln::sync(); }
};

void expectClose(const std::vector<float>& a, const std::vector<float>& b, float tol = 2e-5f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << i;
}

TEST(Tiering, SyncModeTiersUpAndAgreesWithTheInterpreter) {
  Data d;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = stepOnce(d.x, d.w, d.b, 0.5f);
  }
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  for (int i = 0; i < 6; ++i) expectClose(stepOnce(d.x, d.w, d.b, 0.5f), reference);
  Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  // The reference run was this key's first run; the next one reaches the
  // threshold, compiles synchronously and runs compiled.
  EXPECT_EQ(s.interpreted_runs, 0u) << s.str();
  EXPECT_EQ(s.compiled_runs, 6u) << s.str();
  EXPECT_GT(s.kernel_launches, 0u);
  EXPECT_GT(s.compile_ms, 0.0);
}

/// Runs `gradient` (a training step that returns a gradient) once
/// interpreted for reference, then four times with synchronous compiles
/// from the trace's second run, each against the reference; the stats of
/// those four runs.
Stats compiledRunsAgainstInterpreted(const std::function<std::vector<float>()>& gradient) {
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = gradient();
  }
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  for (int i = 0; i < 4; ++i) expectClose(gradient(), reference);
  return stats();
}

TEST(Tiering, ACrossEntropyStepCompilesWhole) {
  // cross_entropy gathers each row's target; the gradient of that gather
  // must keep the step compilable (an index_add over offsets computed in
  // the trace would not be: its indices cannot be checked before launch).
  // Its one-hot product fuses with the softmax's gradient.
  const Tensor x = rand({16, 8}, 4, DType::f32, -1, 1);
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back((i * 3) % 5);
  const Tensor targets = from_vector<int64_t>(labels, {16});
  std::vector<float> w0(8 * 5);
  for (size_t i = 0; i < w0.size(); ++i) w0[i] = std::sin(static_cast<float>(i));
  Stats s = compiledRunsAgainstInterpreted([&] {
    Tensor w = from_vector<float>(w0, {8, 5}).requires_grad();
    cross_entropy(matmul(x, w), targets).backward();
    std::vector<float> g = w.grad().to_vector<float>();
    step();
    return g;
  });
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_GE(s.compiled_runs, 3u) << s.str();  // from the key's second run
}

TEST(Tiering, AStepWithAGatherOfManyIndicesCompilesWhole) {
  // 12 of 40 columns per row: gather's gradient is a scatter_add, whose
  // index (gather's own, a parameter) is checked before launch as gather's.
  std::vector<float> w0(6 * 40);
  for (size_t i = 0; i < w0.size(); ++i) w0[i] = std::sin(static_cast<float>(i));
  std::vector<int64_t> picks;
  for (int i = 0; i < 6 * 12; ++i) picks.push_back((i * 7 + i / 12) % 40);
  const Tensor index = from_vector<int64_t>(picks, {6, 12});
  Stats s = compiledRunsAgainstInterpreted([&] {
    Tensor w = from_vector<float>(w0, {6, 40}).requires_grad();
    Tensor picked = gather(tanh(w), 1, index);
    sum(mul(picked, picked)).backward();
    std::vector<float> g = w.grad().to_vector<float>();
    step();
    return g;
  });
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, 3u) << s.str();
}

TEST(Tiering, OffNeverCompiles) {
  Data d;
  JitScope off(JitMode::Off);
  reset_stats();
  for (int i = 0; i < 5; ++i) stepOnce(d.x, d.w, d.b, 0.25f);
  EXPECT_EQ(stats().compiles, 0u);
  EXPECT_EQ(stats().compiled_runs, 0u);
  EXPECT_EQ(stats().interpreted_runs, 5u);
}

TEST(Tiering, AsyncCompilesInTheBackgroundWhileTheLoopRuns) {
  Data d;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = stepOnce(d.x, d.w, d.b, 0.75f);
  }
  JitScope async(JitMode::Async, 2);
  exec::Engine::instance().setCompileDelayForTesting(400);
  reset_stats();
  auto start = std::chrono::steady_clock::now();
  int steps = 0;
  // Keep stepping: the loop must not wait for the compiler.
  while (stats().compiled_runs == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    expectClose(stepOnce(d.x, d.w, d.b, 0.75f), reference);
    ++steps;
  }
  exec::Engine::instance().setCompileDelayForTesting(0);
  Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_GT(s.interpreted_runs, 3u) << "the loop should keep running interpreted during the slow compile";
  EXPECT_EQ(s.compiled_runs, 1u);
  for (int i = 0; i < 3; ++i) expectClose(stepOnce(d.x, d.w, d.b, 0.75f), reference);
  EXPECT_EQ(stats().compiled_runs, 4u);
}

// The cost model (TieringPolicy.h): a step whose compile pays back within a
// few runs compiles urgently, on a core of its own (the user's TBB
// parallelism lowered while it runs), once the trace's interpreted time has
// been read from runs after its first; a tiny step whose compile needs
// thousands of runs to pay back compiles at the lowest priority.
TEST(Tiering, CompilesThatPayBackSoonGetACoreOfTheirOwn) {
  // An asynchronous device's interpreted run returns once its work is
  // queued: its time says nothing of the step's, nor does a CPU core.
  if (default_device().kind != Device::CPU) GTEST_SKIP() << "the cost model times CPU steps";
  JitScope async(JitMode::Async, 2);
  const size_t parallelism = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  Tensor c = rand({13, 11}, 6, DType::f32, -1, 1);
  auto tinyStep = [&] { return (tanh(c * 0.25f + 3.0f) * c).to_vector<float>(); };
  exec::Engine::instance().setCompileDelayForTesting(300);
  reset_stats();
  tinyStep();  // the input's creation runs with it
  tinyStep();
  for (uint32_t i = 0; i < 1 + exec::kTimedRunsForCostModel; ++i) tinyStep();  // hot, then timed
  EXPECT_EQ(stats().urgent_compiles, 0u) << "a tiny step's compile pays back only after thousands of runs";
  exec::Engine::instance().drainCompiles();

  Tensor a = rand({1536, 1536}, 4, DType::f32, -1, 1), b = rand({1536, 1536}, 5, DType::f32, -1, 1);
  auto slowStep = [&] { return relu(matmul(a, b) * 0.5f + 1.0f).to_vector<float>(); };
  slowStep();  // the inputs' creation runs with it
  slowStep();  // the step's first run: cold, untimed
  slowStep();  // hot: 15-30 ms interpreted, a compile of about 45 ms; its compile starts
  EXPECT_EQ(stats().urgent_compiles, 0u) << "no timed run yet: the compile starts in the background";
  for (uint32_t i = 1; i < exec::kTimedRunsForCostModel; ++i) slowStep();
  Stats s = stats();
  EXPECT_EQ(s.urgent_compiles, 1u) << "timed runs show that it pays back within a few runs: " << s.str();
  if (parallelism > 1) {
    // Once the compile thread has taken the job (it holds it 300 ms).
    const auto start = std::chrono::steady_clock::now();
    while (!exec::compilePartitionActive() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(exec::compilePartitionActive());
    EXPECT_EQ(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism), parallelism - 1);
  }
  std::vector<float> interpreted = slowStep();  // runs on the cores left
  exec::Engine::instance().setCompileDelayForTesting(0);
  exec::Engine::instance().drainCompiles();
  EXPECT_FALSE(exec::compilePartitionActive());
  EXPECT_EQ(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism), parallelism);
  expectClose(slowStep(), interpreted, 1e-4f);
  s = stats();
  EXPECT_EQ(s.compiles, 2u) << s.str();
  EXPECT_GE(s.compiled_runs, 1u) << s.str();
}

// A large trace's first background kernel has LLVM's quick code generator,
// so it arrives sooner; once it has run kFullRecompileAfterQuickRuns times,
// the engine makes the Full kernel from the quick compile's optimised
// modules and swaps it in. A Quick kernel that
// a process left in the disk cache is replaced the same way (compiled from
// the trace) by the next process that runs it, and the disk cache ends up
// with the Full one.
TEST(Tiering, QuickCodegenKernelsAreReplacedByFullOnes) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-quick-codegen-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Data d;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = stepOnce(d.x, d.w, d.b, 1.75f);
  }
  JitScope async(JitMode::Async, 2);
  Settings s = settings();
  s.cache = "on";
  s.cache_dir = dir.string();
  set_settings(s);
  exec::Engine& engine = exec::Engine::instance();
  engine.setQuickCodegenFromMsForTesting(0);  // this small step's too
  auto newProcess = [&] {
    engine.resetProfilesForTesting();
    exec::KernelCache::instance().clearMemory();
    reset_stats();
  };
  // The codegen of the one entry in the disk cache.
  auto cachedCodegen = [&]() -> std::string {
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".kiln") entries.push_back(e.path());
    if (entries.size() != 1) return std::to_string(entries.size()) + " entries";
    std::ifstream in(entries[0], std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    exec::cache::Entry entry;
    std::string error;
    if (!exec::cache::decode(bytes.str(), &entry, &error)) return error;
    return exec::codegenEffortName(entry.meta.codegen);
  };

  auto run = [&] { return stepOnce(d.x, d.w, d.b, 1.75f); };
  // A new process whose step gets hot and compiles its Quick kernel, which
  // then runs once with its Full compile held back. Returns that run.
  auto runQuickKernel = [&] {
    newProcess();
    run();
    run();  // hot: its compile starts
    engine.drainCompiles();
    engine.setTraceCompilesForTesting(false);  // holds its Full compile back
    std::vector<float> viaQuick = run();
    engine.setTraceCompilesForTesting(true);
    return viaQuick;
  };

  // In one process: the Quick kernel runs, then the Full one replaces it.
  std::vector<float> viaQuick = runQuickKernel();
  EXPECT_EQ(stats().quick_compiles, 1u) << stats().str();
  EXPECT_EQ(stats().full_recompiles, 0u);
  EXPECT_EQ(cachedCodegen(), "quick");
  // The Quick kernel again (the run above, with compiles held back, does not
  // count): its Full compile waits until it has stayed hot.
  const uint32_t quickRuns = exec::kFullRecompileAfterQuickRuns;
  ASSERT_GE(quickRuns, 2u);
  for (uint32_t i = 1; i < quickRuns; ++i) expectClose(run(), reference);
  engine.drainCompiles();
  EXPECT_EQ(stats().full_recompiles, 0u) << "upgraded before the Quick kernel ran " << quickRuns << " times";
  const double msPerOp = engine.compileMsPerOpForTesting();
  expectClose(run(), reference);  // its Full compile starts
  engine.drainCompiles();
  std::vector<float> viaFull = run();
  // The upgrade only made machine code: the compile-cost model, which
  // estimates whole compiles, learnt nothing from it.
  EXPECT_EQ(engine.compileMsPerOpForTesting(), msPerOp);
  Stats first = stats();
  EXPECT_EQ(first.compiles, 1u) << first.str();
  EXPECT_EQ(first.full_recompiles, 1u) << first.str();
  EXPECT_EQ(first.compiled_runs, quickRuns + 2) << first.str();
  EXPECT_EQ(cachedCodegen(), "full");
  expectClose(viaQuick, reference);
  EXPECT_EQ(viaQuick, viaFull) << "the same optimised IR, whichever code generator";

  // A process that ended before its Full compile leaves a Quick kernel.
  fs::remove_all(dir);
  runQuickKernel();
  EXPECT_EQ(cachedCodegen(), "quick");
  // A replaying process runs it as it is, compiles nothing and says so once.
  {
    newProcess();
    Settings replay = settings();
    replay.jit = JitMode::Replay;
    set_settings(replay);
    std::ostringstream logged;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
    exec::log().sinks().push_back(sink);
    expectClose(run(), reference);
    expectClose(run(), reference);
    engine.drainCompiles();
    exec::log().sinks().pop_back();
    Stats replayed = stats();
    EXPECT_EQ(replayed.compiled_runs, 2u) << replayed.str();
    EXPECT_EQ(replayed.compiles + replayed.full_recompiles, 0u) << replayed.str();
    EXPECT_EQ(cachedCodegen(), "quick");
    const std::string text = logged.str();
    const size_t warned = text.find("has quick codegen");
    EXPECT_NE(warned, std::string::npos) << text;
    EXPECT_EQ(text.find("has quick codegen", warned + 1), std::string::npos) << "warned more than once:\n" << text;
    replay.jit = JitMode::Async;
    set_settings(replay);
  }
  // The next process loads it at its first run and, once it has stayed hot,
  // compiles the Full one.
  newProcess();
  for (uint32_t i = 0; i < quickRuns; ++i) expectClose(run(), reference);
  engine.drainCompiles();
  Stats second = stats();
  EXPECT_EQ(second.cache_disk_hits, 1u) << second.str();
  EXPECT_EQ(second.full_recompiles, 1u) << second.str();
  EXPECT_EQ(second.compiles, 0u) << second.str();
  // Its Quick kernel came from the disk, so the upgrade compiled the trace
  // whole: a Full compile the model learns from.
  EXPECT_NE(engine.compileMsPerOpForTesting(), msPerOp);
  EXPECT_EQ(cachedCodegen(), "full");
  // And the one after runs the Full kernel and compiles nothing.
  newProcess();
  expectClose(run(), reference);
  engine.drainCompiles();
  Stats third = stats();
  EXPECT_EQ(third.compiled_runs, 1u) << third.str();
  EXPECT_EQ(third.compiles + third.full_recompiles, 0u) << third.str();

  engine.setQuickCodegenFromMsForTesting(exec::kQuickCodegenFromMs);
  fs::remove_all(dir);
}

TEST(Tiering, ThreadsRecordAndRunWhileTheCompilerWorks) {
  Data d;
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = stepOnce(d.x, d.w, d.b, 1.25f);
  }
  JitScope async(JitMode::Async, 2);
  // Fresh profiles and kernels: earlier tests ran this step with other
  // scales, so its scale is a kernel argument and its kernel may exist.
  exec::Engine::instance().resetProfilesForTesting();
  exec::KernelCache::instance().clearMemory();
  reset_stats();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        std::vector<float> r = stepOnce(d.x, d.w, d.b, 1.25f);
        for (size_t k = 0; k < r.size(); ++k)
          if (std::fabs(r[k] - reference[k]) > 2e-5f * (1 + std::fabs(reference[k]))) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  exec::Engine::instance().drainCompiles();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(stats().compiles, 1u) << "one key, compiled once for all threads";
  EXPECT_EQ(stats().interpreted_runs + stats().compiled_runs, 160u);
}

TEST(Tiering, VaryingShapesGetOneDynamicKernelAfterMaxShapes) {
  JitScope sync(JitMode::Sync, 1);
  Settings s = settings();
  s.max_shapes = 3;
  set_settings(s);
  reset_stats();
  // Inputs from host data: only the matmul step is a trace.
  auto hostData = [](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale);
    return v;
  };
  Tensor w = from_vector(hostData(32, 0.7f), {8, 4});
  for (int64_t batch = 1; batch <= 6; ++batch) {
    Tensor x = from_vector(hostData(batch * 8, 0.3f), {batch, 8});
    std::vector<float> got = relu(matmul(x, w) * 0.5f - 0.1f).to_vector<float>();
    std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
    for (int64_t i = 0; i < batch; ++i)
      for (int j = 0; j < 4; ++j) {
        float acc = 0;
        for (int k = 0; k < 8; ++k) acc += xs[i * 8 + k] * ws[k * 4 + j];
        EXPECT_NEAR(got[i * 4 + j], std::max(acc * 0.5f - 0.1f, 0.0f), 1e-5f);
      }
    step();
  }
  // Sizes 1-3 get their own kernels; the fourth shape of the structure gets
  // one dynamic-shape kernel, which sizes 5 and 6 reuse (DynamicShapesTest
  // covers the storm guard of structures that cannot have one).
  EXPECT_EQ(stats().compiles, 4u) << "batch sizes 1-3 compiled, then one dynamic kernel for 4-6";
  EXPECT_EQ(stats().compiled_runs, 6u);
}

TEST(Tiering, SyncAndAsyncAgree) {
  Data d;
  std::vector<float> viaSync, viaAsync;
  {
    JitScope m(JitMode::Sync, 1);
    viaSync = stepOnce(d.x, d.w, d.b, 2.0f);
  }
  {
    JitScope m(JitMode::Async, 1);
    stepOnce(d.x, d.w, d.b, 2.0f);
    exec::Engine::instance().drainCompiles();
    viaAsync = stepOnce(d.x, d.w, d.b, 2.0f);
  }
  EXPECT_EQ(viaSync, viaAsync);
  EXPECT_GE(stats().compiled_runs, 2u);
}

/// Runs `child` in a forked child, which then does what exit() does for
/// Kiln (its exit handlers: they waited for the parent's compile threads,
/// and joined or detached them) and ends by _exit with child()'s status, as
/// Python's multiprocessing ends its children: TBB's own static destructors
/// are not fork-safe (after tbb::global_control changes in the parent they
/// crashed in a child's exit()). The child's status, or -1 when it ran 30 s.
int inForkedChild(const std::function<int()>& child) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int status = child();
    exec::finishCompilesAtExit();
    exec::WarmStart::instance().join();
    std::fflush(nullptr);
    std::_Exit(status);
  }
  for (int waited = 0; waited < 3000; ++waited) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// A process forked after it compiled in the background has none of its
// parent's compile threads: it compiles on threads of its own (a trace
// whose compile was queued at the fork is compiled again), its kernels from
// before the fork still run, and it exits without waiting for the parent's.
TEST(Tiering, AForkedChildCompilesOnItsOwnThreads) {
  // A device with threads of its own (a stream's) is not usable in a forked
  // child, as CUDA is not: the fork contract is the CPU's.
  if (default_device().kind != Device::CPU) GTEST_SKIP() << "fork: CPU tensors only";
  JitScope async(JitMode::Async, 2);
  exec::Engine& engine = exec::Engine::instance();
  Tensor x = rand({64, 64}, 3);
  auto chain = [&](int n) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = tanh(y * 1.01f + 0.5f);
    return sum(y).item<float>();
  };
  float expected[3];
  {
    JitScope off(JitMode::Off);
    for (int n : {4, 5, 6}) expected[n - 4] = chain(n);
  }
  auto same = [](float a, float b) { return std::abs(a - b) <= 1e-3f * std::abs(b); };
  chain(4);
  chain(4);  // hot: compiled in the background
  engine.drainCompiles();
  ASSERT_EQ(chain(4), chain(4));
  ASSERT_GT(stats().compiled_runs, 0u);
  // Forked while chain(5)'s compile waits on the parent's compile thread.
  engine.setCompileDelayForTesting(400);
  chain(5);
  chain(5);
  const int status = inForkedChild([&] {
    engine.setCompileDelayForTesting(0);
    reset_stats();
    if (!same(chain(4), expected[0])) return 1;
    if (stats().compiled_runs != 1) return 2;  // the parent's kernel
    for (int i = 0; i < 3; ++i)
      if (!same(chain(6), expected[2])) return 3;
    chain(5);  // its compile was lost with the parent's thread: compiled anew
    engine.drainCompiles();
    reset_stats();
    if (!same(chain(5), expected[1]) || !same(chain(6), expected[2])) return 4;
    if (stats().compiled_runs != 2) return 5;
    return 0;
  });
  engine.setCompileDelayForTesting(0);
  EXPECT_EQ(status, 0) << "1-4: a wrong result, 5: not compiled in the child, -1: the child hung, > 128: killed by a signal";
  EXPECT_TRUE(same(chain(5), expected[1]));
}

// Forked right as a large trace gets hot, perhaps while the compiler loads
// or compiles on the parent's thread: whichever, the child computes right
// and exits (it may not compile: see CompilerLoader.cpp).
TEST(Tiering, AForkedChildOfACompilingProcessExits) {
  // A device with threads of its own (a stream's) is not usable in a forked
  // child, as CUDA is not: the fork contract is the CPU's.
  if (default_device().kind != Device::CPU) GTEST_SKIP() << "fork: CPU tensors only";
  JitScope async(JitMode::Async, 2);
  Tensor x = rand({64, 64}, 4);
  auto chain = [&](int n) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = tanh(y * 1.01f + 0.5f);
    return sum(y).item<float>();
  };
  float expected = 0;
  {
    JitScope off(JitMode::Off);
    expected = chain(90);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    chain(90 + attempt);
    chain(90 + attempt);  // hot: its compile starts now
    const int status = inForkedChild([&] {
      for (int i = 0; i < 4; ++i)
        if (std::abs(chain(90) - expected) > 1e-3f * std::abs(expected)) return 1;
      return 0;
    });
    EXPECT_EQ(status, 0) << "attempt " << attempt << ": 1: a wrong result, -1: the child hung, > 128: killed by a signal";
  }
}

TEST(Tiering, IntegerToFloatCastRoundsOnceInBothTiers) {
  // 2^60 + 2^36 + 1 is 2^60 + 2^37 in f32 rounded once, 2^60 through f64.
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  Tensor i = from_vector(std::vector<int64_t>{big, -big, 3}, {3});
  kiln::sync();
  for (JitMode mode : {JitMode::Off, JitMode::Sync}) {
    JitScope scope(mode, 1);
    reset_stats();
    for (int run = 0; run < 2; ++run) {
      std::vector<float> f = (cast(i, DType::f32) * 1.0f).to_vector<float>();
      EXPECT_EQ(f, (std::vector<float>{0x1p60f + 0x1p37f, -(0x1p60f + 0x1p37f), 3.0f})) << to_string(mode) << run;
    }
    if (mode == JitMode::Sync) {
      EXPECT_GT(stats().compiled_runs, 0u);
    }
  }
}

TEST(Tiering, IndexOutOfRangeStillReportedAfterTierUp) {
  JitScope m(JitMode::Sync, 1);
  Tensor table = rand({5, 3}, 7);
  auto lookup = [&](std::vector<int64_t> ids) {
    Tensor idx = from_vector<int64_t>(ids, {static_cast<int64_t>(ids.size())});
    // The check at the call only sees materialized indices; the cast keeps
    // this one pending, so the compiled path must check it before launch.
    Tensor r = index_select(table * 2.0f, 0, cast(idx, DType::i32));
    return r;
  };
  EXPECT_EQ(lookup({0, 4}).to_vector<float>().size(), 6u);
  reset_stats();
  std::vector<float> picked = lookup({1, 2}).to_vector<float>();
  EXPECT_EQ(stats().compiled_runs, 1u) << "the index is checked before the compiled run";
  std::vector<float> table2 = (table * 2.0f).to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(picked[j], table2[3 + j]);
    EXPECT_FLOAT_EQ(picked[3 + j], table2[6 + j]);
  }
  EXPECT_THROW(lookup({1, 9}).to_vector<float>(), Error);
}

/// The texts of the files of `dir` whose names contain `stage`.
std::vector<std::string> dumpsOf(const std::filesystem::path& dir, const std::string& stage) {
  std::vector<std::string> texts;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().string().find(stage) == std::string::npos) continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    texts.push_back(ss.str());
  }
  return texts;
}

/// Counts `needle` in the files of `dir` whose names contain `stage`.
int countInDumps(const std::filesystem::path& dir, const std::string& stage, const std::string& needle,
                 int* files = nullptr) {
  int count = 0;
  for (const std::string& text : dumpsOf(dir, stage)) {
    if (files) ++*files;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  }
  return count;
}

/// A fresh, empty dump directory of this process (the CPU and test-device
/// runs of this suite run at the same time under ctest -j), removed with its
/// dumps when the test ends.
struct DumpDirectory : std::filesystem::path {
  explicit DumpDirectory(const std::string& name)
      : std::filesystem::path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(*this);
    std::filesystem::create_directories(*this);
  }
  DumpDirectory(const DumpDirectory&) = delete;
  DumpDirectory& operator=(const DumpDirectory&) = delete;
  ~DumpDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(*this, ignored);
  }
};

/// `run` interpreted, then compiled in this thread (sync, threshold 1) with
/// its IR dumped to `dir`: the interpreted result, the compiled one and the
/// compiled runs the second took.
template <class Run>
std::tuple<std::vector<float>, std::vector<float>, uint64_t> interpretedThenCompiled(Run run,
                                                                                   const std::filesystem::path& dir) {
  std::vector<float> reference, compiled;
  {
    JitScope off(JitMode::Off);
    reference = run();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  uint64_t compiledRuns = 0;
  {
    JitScope sync(JitMode::Sync, 1);
    const uint64_t before = stats().compiled_runs;
    compiled = run();
    compiledRuns = stats().compiled_runs - before;
  }
  unsetenv("KILN_DUMP_IR");
  return {reference, compiled, compiledRuns};
}

/// Each element of `got` has the bits of `want`'s (NaN payloads included).
void expectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "element " << i << ": " << got[i] << " vs " << want[i];
}

/// `a` then `b`.
std::vector<float> concat(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Tiering, CompiledKernelsNeverCallMalloc) {
  DumpDirectory dir("kiln-dump-test");
  setenv("KILN_DUMP_IR", dir.c_str(), 1);  // read by the compiler when it loads
  // Large enough that its loops are parallelised (small ones stay serial).
  Tensor x = rand({512, 256}, 11), w = rand({256, 128}, 12), b = rand({128}, 13);
  kiln::sync();
  JitScope m(JitMode::Sync, 1);
  stepOnce(x, w, b, 1.5f);
  int optimized = 0;
  EXPECT_EQ(countInDumps(dir, "optimized.ll", "@malloc", &optimized), 0);
  EXPECT_GE(countInDumps(dir, "optimized.ll", "kiln_rt_parallel_for"), 1) << "parallel loops go through the runtime";
  EXPECT_EQ(optimized, 1);
  unsetenv("KILN_DUMP_IR");
}

TEST(Tiering, RecurrentMatmulsStayMatmulsAndAreNotRecomputed) {
  // h = tanh(h @ w + x_t @ u + b) unrolled: elementwise fusion must not pull
  // the tanh of one step into the next step's matmul (it would be recomputed
  // for every output column, and the matmul would become generic loops
  // instead of a call of the runtime's GEMM).
  DumpDirectory dir("kiln-dump-rnn-test");
  Tensor w = rand({32, 32}, 21, DType::f32, -0.2, 0.2), u = rand({16, 32}, 22, DType::f32, -0.2, 0.2);
  Tensor b = rand({32}, 23), h0 = rand({8, 32}, 24, DType::f32, -1, 1), xs = rand({3, 8, 16}, 25, DType::f32, -1, 1);
  kiln::sync();
  auto run = [&] {
    Tensor h = h0;
    for (int t = 0; t < 3; ++t) h = tanh(matmul(h, w) + matmul(reshape(slice(xs, 0, t, t + 1), {8, 16}), u) + b);
    return h.to_vector<float>();
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  expectClose(compiled, reference, 1e-5f);
  int files = 0;
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul", &files), 6);
  EXPECT_EQ(files, 1);
  // Each matmul has a zero fill of its own (CSE merges them; unshareFilledInits
  // splits them again), so each is C = A*B: no fill, no read of C.
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_f32"), 6);
  EXPECT_EQ(countInDumps(dir, "1-linalg", "\"reduction\""), 0) << "a matmul became a generic reduction";
}

TEST(Tiering, BiasAndReluAfterAMatmulRunInTheGemmsTileStore) {
  // relu(x @ w + b) and x @ w + b compile to one call of the epilogue GEMM
  // each, writing the result directly (no temporary C and no second loop),
  // and agree with the interpreter; a NaN in x stays NaN through the ReLU.
  DumpDirectory dir("kiln-dump-epilogue-test");
  std::vector<float> xs(37 * 50);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 200) / 100.f - 1.f;
  xs[3 * 50 + 4] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector(xs, {37, 50});
  Tensor w = rand({50, 70}, 41, DType::f32, -1, 1), b = rand({70}, 42, DType::f32, -1, 1);
  kiln::sync();
  auto run = [&] {
    Tensor h = relu(matmul(x, w) + b);
    Tensor y = matmul(h, transpose(w)) + rand({50}, 43, DType::f32, -1, 1);
    return std::make_pair(h.to_vector<float>(), y.to_vector<float>());
  };
  std::pair<std::vector<float>, std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    reference = run();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  {
    JitScope sync(JitMode::Sync, 1);
    const auto compiled = run();
    for (const auto& [got, want] : {std::make_pair(compiled.first, reference.first),
                                    std::make_pair(compiled.second, reference.second)}) {
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
          continue;
        }
        EXPECT_NEAR(got[i], want[i], 1e-4f * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
      }
    }
  }
  unsetenv("KILN_DUMP_IR");
  EXPECT_TRUE(std::isnan(reference.first[3 * 70]));
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_f32"), 2);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_f32"), 0);
}

TEST(Tiering, AResidualAddAfterAMatmulRunsInTheGemmsTileStore) {
  // relu((x @ w + b) + t) and r2 + h @ w2, a residual block's adds: one call
  // of the epilogue GEMM each, the residual read in the tile store, and the
  // interpreter's bits. t is dead once recorded, so h takes its buffer
  // (buffer donation): with K = 1100 (two depth passes) the runtime copies
  // the residual before the GEMM writes partial sums over it.
  DumpDirectory dir("kiln-dump-residual-test");
  Tensor x = rand({37, 1100}, 71, DType::f32, -1, 1), w = rand({1100, 70}, 72, DType::f32, -1, 1);
  Tensor b = rand({70}, 73, DType::f32, -1, 1), r = rand({37, 70}, 74, DType::f32, -2, 2);
  Tensor w2 = rand({70, 40}, 75, DType::f32, -1, 1), r2 = rand({37, 40}, 76, DType::f32, -2, 2);
  kiln::sync();
  auto run = [&] {
    Tensor t = r * 2.0f;
    kiln::sync();
    Tensor h = relu((matmul(x, w) + b) + t);
    t = Tensor();
    Tensor y = r2 + matmul(h, w2);
    return concat(h.to_vector<float>(), y.to_vector<float>());
  };
  const uint64_t donatedBefore = kiln::stats().donated_buffers;
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  EXPECT_GT(kiln::stats().donated_buffers, donatedBefore) << "h did not take t's buffer";
  expectSameBits(compiled, reference);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_f32"), 2);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_f32"), 0);
}

TEST(Tiering, ADonatedInputReadAsTheGemmsAAndResidualIsNotOverwritten) {
  // x = relu(x @ w + x), x's old buffer given to the new x (buffer
  // donation): x is both A and the residual, so fusing the add into the
  // GEMM's tile store would write early tiles over A while later tiles read
  // it (found by review: 2.4 from the interpreter after 6 steps).
  DumpDirectory dir("kiln-dump-donated-a-test");
  Tensor w = rand({256, 256}, 91, DType::f32, -0.05, 0.05);
  auto run = [&] {
    Tensor x = rand({256, 256}, 92, DType::f32, -1, 1);
    kiln::sync();
    for (int i = 0; i < 4; ++i) {
      Tensor y = relu(matmul(x, w) + x);
      x = y;
      kiln::sync();
    }
    return x.to_vector<float>();
  };
  const uint64_t donatedBefore = kiln::stats().donated_buffers;
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  EXPECT_GT(kiln::stats().donated_buffers, donatedBefore) << "y did not take x's buffer";
  EXPECT_GT(compiledRuns, 0u);
  expectSameBits(compiled, reference);
}

/// i64 indices n-1, ..., 0.
Tensor reversedIndex(int64_t n) {
  std::vector<int64_t> reversed(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) reversed[static_cast<size_t>(j)] = n - 1 - j;
  return from_vector(reversed, {n});
}

TEST(Tiering, ADonatedInputGatheredByItsWriterIsNotOverwrittenFirst) {
  // x = x + index_select(x, 1, reversed): the gather fuses into the add,
  // whose payload then loads x at other elements than it writes. Given x's
  // buffer (donation), the add overwrote elements its later iterations
  // still gathered (found by review: sums 4438.9 against 1981.4).
  DumpDirectory dir("kiln-dump-donated-gather-test");
  Tensor perm = reversedIndex(64);
  auto run = [&] {
    Tensor x = rand({32, 64}, 95, DType::f32, -1, 1);
    kiln::sync();
    for (int i = 0; i < 4; ++i) {
      Tensor y = x + index_select(x, 1, perm);
      x = y;
      kiln::sync();
    }
    return x.to_vector<float>();
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  EXPECT_GT(compiledRuns, 0u);
  expectSameBits(compiled, reference);
}

TEST(Tiering, RowLoopsOverADonatedPairMergeOnlyAtTheSameElement) {
  // z = index_select(x, 1, reversed) and y = -x in one kernel, x's buffer
  // given to y: the row's two inner loops (read x reversed; write y) are one
  // buffer's, and merged, iteration j wrote y[i, j] = x[i, j] before
  // iteration 63 - j read it (found by review: half of z negated).
  DumpDirectory dir("kiln-dump-donated-rows-test");
  Tensor perm = reversedIndex(64);
  auto run = [&] {
    Tensor x = rand({32, 64}, 96, DType::f32, -1, 1);
    kiln::sync();
    std::vector<float> out;
    for (int i = 0; i < 4; ++i) {
      Tensor z = index_select(x, 1, perm);
      Tensor y = -x;
      x = y;
      kiln::sync();
      const std::vector<float> zs = z.to_vector<float>();
      out.insert(out.end(), zs.begin(), zs.end());
    }
    return out;
  };
  const uint64_t donatedBefore = kiln::stats().donated_buffers;
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  EXPECT_GT(kiln::stats().donated_buffers, donatedBefore) << "y did not take x's buffer";
  EXPECT_GT(compiledRuns, 0u);
  expectSameBits(compiled, reference);
}

TEST(Tiering, AnIndexThroughANarrowingCastIsCheckedAsTheInterpreterSeesIt) {
  // index_select(x, 0, cast(i64 200, i8)): the index read is -56, out of
  // range. The launch checks only the parameter's values (200 is in range),
  // and the kernel clamps what it reads, so the compiled trace returned 0
  // where the interpreter throws (found by review). A cast into a type that
  // cannot hold every index below the extent (i8, extent 256) now makes the
  // trace uncompilable: both tiers throw. (i64 to i32 still compiles:
  // IndexOutOfRangeStillReportedAfterTierUp.)
  std::vector<float> xs(256);
  for (int i = 0; i < 256; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor x = from_vector(xs, {256});
  Tensor index = from_vector(std::vector<int64_t>{200}, {1});
  kiln::sync();
  for (JitMode mode : {JitMode::Off, JitMode::Sync}) {
    JitScope scope(mode, 1);
    for (int run = 0; run < 3; ++run)
      EXPECT_THROW(index_select(x, 0, cast(index, DType::i8)).to_vector<float>(), Error) << to_string(mode) << run;
  }
  // A widening cast keeps the values: the trace compiles and checks them.
  JitScope sync(JitMode::Sync, 1);
  const uint64_t compiledBefore = stats().compiled_runs;
  Tensor small = from_vector(std::vector<int32_t>{7}, {1});
  for (int run = 0; run < 2; ++run)
    EXPECT_EQ(index_select(x, 0, cast(small, DType::i64)).to_vector<float>(), (std::vector<float>{7}));
  EXPECT_GT(stats().compiled_runs, compiledBefore);
}

TEST(Tiering, AScaledMatmulRunsInTheGemmsTileStore) {
  // relu(x @ w * 0.3 + b): the scale, then the bias and the ReLU, in the
  // tile store (one call of the epilogue GEMM), the interpreter's bits (the
  // scale and the bias round apart, as two ops do).
  DumpDirectory dir("kiln-dump-scale-test");
  Tensor x = rand({37, 50}, 81, DType::f32, -1, 1), w = rand({50, 70}, 82, DType::f32, -1, 1);
  Tensor b = rand({70}, 83, DType::f32, -1, 1);
  kiln::sync();
  // The temporaries die before the trace runs (the result is read in the
  // next statement): read in the same full expression, they would be live
  // outputs of the kernel, and the product must then be written itself.
  auto run = [&] {
    Tensor y = relu(matmul(x, w) * 0.3f + b);
    return y.to_vector<float>();
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  expectSameBits(compiled, reference);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_f32"), 1);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_f32"), 0);
}

TEST(Tiering, ALargeStepCompilesInPartsOnSeveralThreadsAndAgrees) {
  // 60 small layers: every loop stays serial, so the kernel's serial code
  // is thousands of operations. It is cut into parts (SerialParts.h), which
  // compile in shares on this thread and a helper (ModulePartition.h) and
  // link into one kernel that agrees with the interpreter.
  DumpDirectory dir("kiln-dump-parts-test");
  std::vector<Tensor> ws, bs;
  for (int i = 0; i < 60; ++i) {
    ws.push_back(rand({16, 16}, 100 + i, DType::f32, -0.4, 0.4));
    bs.push_back(rand({16}, 200 + i, DType::f32, -0.2, 0.2));
  }
  Tensor x = rand({8, 16}, 51, DType::f32, -1, 1);
  kiln::sync();
  auto run = [&] {
    Tensor h = x;
    for (size_t i = 0; i < ws.size(); ++i) h = tanh(matmul(h, ws[i]) + bs[i]) * 0.9 + sigmoid(h) * 0.1;
    return h.to_vector<float>();
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  expectClose(compiled, reference, 1e-4f);
  EXPECT_EQ(compiledRuns, 1u);
  EXPECT_GE(countInDumps(dir, "4-llvm-dialect", "_part1("), 1) << "the kernel was not cut into parts";
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_EQ(countInDumps(dir, "optimized.ll", "; share 1 of"), 1) << "the parts did not compile in shares";
  }
}

TEST(Tiering, Bf16MatmulsCallTheRuntimeBf16Gemm) {
  // bf16 matmuls, one of them by a transposed weight (dX = dY W^T): the
  // compiled kernel hands the bf16 operands to the runtime's bf16 GEMM as
  // they are (no widening to f32) and agrees with the interpreter within one
  // bf16 ulp.
  DumpDirectory dir("kiln-dump-bf16-matmul-test");
  Tensor x = cast(rand({40, 72}, 31, DType::f32, -1, 1), DType::bf16);
  Tensor w = cast(rand({72, 56}, 32, DType::f32, -1, 1), DType::bf16);
  Tensor v = cast(rand({48, 56}, 33, DType::f32, -1, 1), DType::bf16);
  kiln::sync();
  auto run = [&] { return cast(matmul(relu(matmul(x, w)), transpose(v)), DType::f32).to_vector<float>(); };
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = run();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  {
    JitScope sync(JitMode::Sync, 1);
    const std::vector<float> compiled = run();
    ASSERT_EQ(compiled.size(), reference.size());
    for (size_t i = 0; i < compiled.size(); ++i)
      EXPECT_NEAR(compiled[i], reference[i], std::fabs(reference[i]) * 0x1p-7f + 1e-6f) << "element " << i;
  }
  unsetenv("KILN_DUMP_IR");
  // Each rounds its result to bf16 in the GEMM (ABf16MatmulIsRoundedToBf16InTheGemm).
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_bf16"), 2);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "kiln_rt_matmul_f32"), 0);
}

TEST(Tiering, ABf16MatmulIsRoundedToBf16InTheGemm) {
  // A bf16 product (f32 sums rounded to bf16) compiles to one call of the
  // bf16 epilogue GEMM, which rounds each block of C as it finishes it (no
  // f32 C, no second loop), also past one depth pass of the kernel (K =
  // 1100), and gives the interpreter's bits, NaN included.
  DumpDirectory dir("kiln-dump-bf16-rounded-test");
  std::vector<float> xs(37 * 50);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 200) / 100.f - 1.f;
  xs[5 * 50 + 7] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = cast(from_vector(xs, {37, 50}), DType::bf16);
  Tensor w = cast(rand({50, 70}, 61, DType::f32, -1, 1), DType::bf16);
  Tensor x2 = cast(rand({20, 1100}, 62, DType::f32, -1, 1), DType::bf16);
  Tensor w2 = cast(rand({1100, 30}, 63, DType::f32, -1, 1), DType::bf16);
  kiln::sync();
  auto run = [&] {
    Tensor a = matmul(x, w), b = matmul(x2, w2);
    return concat(cast(a, DType::f32).to_vector<float>(), cast(b, DType::f32).to_vector<float>());
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  expectSameBits(compiled, reference);
  EXPECT_TRUE(std::isnan(reference[5 * 70]));
  EXPECT_FALSE(std::isnan(reference[4 * 70]));
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_bf16"), 2);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_bf16"), 0);
}

TEST(Tiering, CastsFromHalfTypesFoldIntoTheGemm) {
  // f32 products of operands cast from bf16 and f16 compile to calls that
  // read the half buffers and widen them as the GEMM packs them (no cast
  // loop, no f32 copy): a plain product (cast(x) @ cast(w), packed, two
  // depth passes), a batch over a shared weight, and one with a bias and
  // relu after it (the epilogue GEMM); the interpreter's bits, NaN and
  // infinity included.
  DumpDirectory dir("kiln-dump-half-cast-test");
  std::vector<float> xs(40 * 1100);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 200) / 100.f - 1.f;
  xs[3 * 1100 + 7] = std::numeric_limits<float>::quiet_NaN();
  xs[9 * 1100 + 2] = 1e6f;  // an f16 infinity
  Tensor x = cast(from_vector(xs, {40, 1100}), DType::bf16);
  Tensor xh = cast(from_vector(xs, {40, 1100}), DType::f16);
  Tensor w = cast(rand({1100, 70}, 71, DType::f32, -1, 1), DType::f16);
  Tensor wf = rand({1100, 70}, 72, DType::f32, -1, 1);
  Tensor xb = cast(rand({3, 16, 24}, 73, DType::f32, -1, 1), DType::bf16), wb = rand({24, 40}, 74);
  Tensor bias = rand({70}, 75);
  kiln::sync();
  auto run = [&] {
    Tensor a = matmul(cast(x, DType::f32), cast(w, DType::f32));
    Tensor b = matmul(cast(xb, DType::f32), wb);
    Tensor c = relu(matmul(cast(xh, DType::f32), wf) + bias);
    return concat(concat(a.to_vector<float>(), b.to_vector<float>()), c.to_vector<float>());
  };
  const auto [reference, compiled, compiledRuns] = interpretedThenCompiled(run, dir);
  expectSameBits(compiled, reference);
  EXPECT_TRUE(std::isnan(reference[3 * 70]));
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_widening_f32"), 2);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_epilogue_f32"), 1);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_matmul_set_f32"), 0);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "arith.extf"), 0) << "a cast loop was left";
}

TEST(Tiering, ConvolutionsCallTheRuntimeGemmOnTheUnpaddedInput) {
  // conv2d + bias + ReLU, twice: each f32 convolution becomes a call of the
  // runtime's implicit GEMM that reads the input itself (no padded copy, no
  // generic convolution loops), and the results match the interpreter's.
  DumpDirectory dir("kiln-dump-conv-test");
  Tensor x = rand({2, 8, 10, 9}, 41, DType::f32, -1, 1), w1 = rand({12, 4, 3, 3}, 42, DType::f32, -0.3, 0.3);
  Tensor b1 = rand({12}, 43), w2 = rand({6, 12, 3, 2}, 44, DType::f32, -0.3, 0.3);
  kiln::sync();
  auto run = [&] {
    Conv2dOptions a;
    a.padding = {1};
    a.groups = 2;
    Conv2dOptions b;
    b.stride = {2, 1};
    b.padding = {0, 1, 2, 0};
    b.dilation = {1, 2};
    Tensor h = relu(conv2d(x, w1, b1, a));
    return relu(conv2d(h, w2, {}, b)).to_vector<float>();
  };
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = run();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  {
    JitScope sync(JitMode::Sync, 1);
    expectClose(run(), reference, 1e-5f);
  }
  unsetenv("KILN_DUMP_IR");
  int files = 0;
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "call @kiln_rt_conv2d_f32", &files), 2);
  EXPECT_GE(files, 1);  // the trace's kernel (and the compiler's warm-up when it loads here)
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "linalg.conv_2d"), 0);
  EXPECT_EQ(countInDumps(dir, "2-bufferized", "linalg.map"), 0) << "a padded copy of the input is still made";
}

TEST(Tiering, BatchNormStatisticsFuseAndRunOneLaunchPerReduction) {
  // A training batch norm's y = (x - mean) * rsqrt(var + eps) * g + b: x - mean
  // feeds both the variance's sum and y, and is recomputed in each instead of
  // written out, so y is the kernel's one full-size result; each per-channel
  // sum over N, H and W runs as one parallel loop over channels (not a launch
  // per image). The gradients agree with the interpreter's too.
  namespace fs = std::filesystem;
  DumpDirectory dir("kiln-dump-batch-norm-test");
  Tensor x = rand({8, 16, 24, 24}, 51, DType::f32, -2, 2);
  Tensor g = rand({16}, 52, DType::f32, 0.5, 1.5), b = rand({16}, 53, DType::f32, -0.5, 0.5);
  kiln::sync();
  auto forward = [&] { return batch_norm(x, g, b, {}, {}, /*training=*/true).y.to_vector<float>(); };
  auto [reference, compiled, runs] = interpretedThenCompiled(forward, dir);
  EXPECT_EQ(runs, 1u);
  expectClose(compiled, reference, 1e-5f);
  EXPECT_EQ(countInDumps(dir, "1-linalg", "} -> tensor<8x16x24x24xf32>"), 1)
      << "x - mean or its scaled form is written out";
  EXPECT_EQ(countInDumps(dir, "1-linalg", "tensor.expand_shape %arg0"), 0) << "the sums read x reshaped";
  // Mean, variance and y: one parallel loop each; the sums' inner loops run
  // over a whole H x W plane (576 elements), not a row of W, in f32 blocks of
  // 64 (kiln-cpu-block-wide-sums).
  EXPECT_EQ(countInDumps(dir, "3-loops", "call @__kiln_parallel_"), 3);
  EXPECT_EQ(countInDumps(dir, "3-loops", "to %c576 step %c64 iter_args"), 2);

  fs::remove_all(dir);
  fs::create_directories(dir);
  auto gradients = [&] {
    Tensor xl = x.detach(), gl = g.detach();
    xl.requires_grad();
    gl.requires_grad();
    Tensor y = batch_norm(xl, gl, b, {}, {}, /*training=*/true).y;
    std::vector<Tensor> d = grad(sum(mul(y, y)), {xl, gl});
    std::vector<float> all = d[0].to_vector<float>(), dg = d[1].to_vector<float>();
    all.insert(all.end(), dg.begin(), dg.end());
    return all;
  };
  auto [gradReference, gradCompiled, gradRuns] = interpretedThenCompiled(gradients, dir);
  EXPECT_EQ(gradRuns, 1u);
  expectClose(gradCompiled, gradReference, 1e-3f);
}

TEST(Tiering, RowWiseNestsRunAsOneLoopOverRows) {
  // softmax = max, exp, sum, divide: four nests over the same rows that run
  // as one parallel loop (each row stays in cache), with the same results.
  DumpDirectory dir("kiln-dump-rows-test");
  Tensor x = rand({256, 512}, 31, DType::f32, -4, 4);
  kiln::sync();
  std::vector<float> reference;
  {
    JitScope off(JitMode::Off);
    reference = softmax(x, -1).to_vector<float>();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  {
    JitScope sync(JitMode::Sync, 1);
    expectClose(softmax(x, -1).to_vector<float>(), reference, 1e-6f);
  }
  unsetenv("KILN_DUMP_IR");
  int files = 0;
  EXPECT_EQ(countInDumps(dir, "3-loops", "call @__kiln_parallel_", &files), 1);
  EXPECT_EQ(files, 1);
  // The exp row is written into the result row and scaled there
  // (kiln-cpu-row-buffers-into-outputs), not into a row buffer of 512 floats.
  EXPECT_EQ(countInDumps(dir, "3-loops", "memref<2048xi8>"), 0) << "the exp row still goes through a row buffer";
}

/// |c - r| in units of r's last place (f32; denormals in units of 2^-149).
double ulpsApart(float c, float r) {
  if (std::isnan(r) || std::isnan(c)) return std::isnan(r) && std::isnan(c) ? 0 : INFINITY;
  const float a = std::fabs(r);
  const double ulp = a < std::numeric_limits<float>::min()
                         ? std::ldexp(1.0, -149)
                         : std::nextafter(a, INFINITY) - static_cast<double>(a);
  return std::fabs(static_cast<double>(c) - r) / ulp;
}

TEST(Tiering, CompiledExpStaysWithinAnUlpOfLibm) {
  // 2^16 points over exp's finite range, as exp(x) (the general expansion)
  // and as exp(x - max(x)) and sigmoid (the kiln.nonpositive_operand
  // one, softmax's and sigmoid's): the compiled polynomial is within 0.88 ulp
  // of exp, the interpreter's expf within 0.5, so the two are at most one
  // float apart; sigmoid adds a division and a product. Tolerances elsewhere
  // are 1e-5 relative, far looser.
  DumpDirectory dir("kiln-dump-exp-ulps-test");
  std::vector<float> xs(1 << 16);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(-104.0 + 192.7 * i / (xs.size() - 1));
  Tensor x = from_vector(xs, {256, 256});
  kiln::sync();
  auto run = [&] {
    // Each column holds the whole range, so x - max(x) over columns spans
    // [-192.7, 0]; one trace for the three.
    const Tensor results[] = {exp(x), exp(sub(x, max(x, {0}, true))), sigmoid(x)};
    std::vector<float> all;
    for (const Tensor& t : results) {
      std::vector<float> v = t.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  auto [reference, compiled, runs] = interpretedThenCompiled(run, dir);
  EXPECT_EQ(runs, 1u);
  ASSERT_EQ(compiled.size(), reference.size());
  double worst[3] = {0, 0, 0};
  for (size_t i = 0; i < compiled.size(); ++i)
    worst[i / xs.size()] = std::max(worst[i / xs.size()], ulpsApart(compiled[i], reference[i]));
  // Measured: 1, 1 and 2 (neighbouring floats at worst).
  EXPECT_LE(worst[0], 1.0) << "exp";
  EXPECT_LE(worst[1], 1.0) << "exp(x - max(x))";
  EXPECT_LE(worst[2], 2.0) << "sigmoid";
  EXPECT_EQ(countInDumps(dir, "1-linalg", "{kiln.nonpositive_operand}"), 2) << "exp(x - max) and sigmoid's exp(-|x|)";
  if (exec::hostFingerprint().find("+avx512f") != std::string::npos) {
    // AVX-512: every exp scales by 2^k with one vscalefps (llvm.intr.ldexp).
    EXPECT_GE(countInDumps(dir, "3-loops", "llvm.intr.ldexp"), 3);
    EXPECT_EQ(countInDumps(dir, "3-loops", "0x4B400097"), 0);
  } else {
    // The marked expansion's rounding constant, 1.5 * 2^23 + 151.
    EXPECT_GE(countInDumps(dir, "3-loops", "0x4B400097"), 1);
  }
}

TEST(Tiering, LatencyBoundLoopsAreNotMachineScheduled) {
  // chain8's body, a long chain of float operations per element (tanh and
  // sigmoid expanded): ParallelLoops interleaves four vector iterations, and
  // the function holding the loop (and its trampoline, into which LLVM
  // inlines it) is marked for codegen without the machine scheduler
  // (CodegenGate.h). A light loop's function is not marked.
  Tensor x = rand({int64_t{1} << 20}, 45, DType::f32, -1, 1);
  kiln::sync();
  // The temporaries die before the flush: the kernel's one output is y.
  auto chain = [&] {
    Tensor y = tanh((x * 1.5f + 0.5f) * sigmoid(x)) + x * x;
    return y.to_vector<float>();
  };
  auto light = [&] {
    Tensor y = x * x + x;
    return y.to_vector<float>();
  };
  auto markedIn = [&](const std::function<std::vector<float>()>& run, const char* name) {
    std::vector<float> reference;
    {
      JitScope off(JitMode::Off);
      reference = run();
    }
    DumpDirectory dir(name);
    setenv("KILN_DUMP_IR", dir.c_str(), 1);
    std::vector<float> compiled;
    {
      JitScope sync(JitMode::Sync, 1);
      reset_stats();
      compiled = run();
      EXPECT_EQ(stats().compiled_runs, 1u) << name;
    }
    unsetenv("KILN_DUMP_IR");
    expectClose(compiled, reference, 1e-5f);
    // Four copies, or eight with 512-bit vectors (ParallelLoops.h).
    EXPECT_EQ(countInDumps(dir, "4-llvm-dialect", "loop_interleave<count = 4") +
                  countInDumps(dir, "4-llvm-dialect", "loop_interleave<count = 8"),
              std::string(name) == "kiln-dump-chain-test")
        << name;
    return countInDumps(dir, "5-optimized.ll", "\"kiln-unscheduled\"");
  };
  EXPECT_GE(markedIn(chain, "kiln-dump-chain-test"), 1);
  EXPECT_EQ(markedIn(light, "kiln-dump-light-test"), 0);
}

/// Lines of the dumped LLVM IR (5-optimized.ll) for which `counts` holds.
int linesInOptimizedDumps(const std::filesystem::path& dir, const std::function<bool(const std::string&)>& counts) {
  int count = 0;
  for (const std::string& text : dumpsOf(dir, "5-optimized.ll")) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) count += counts(line);
  }
  return count;
}

bool isVectorStreamingStore(const std::string& line) {
  return line.find("store <") != std::string::npos && line.find("!nontemporal") != std::string::npos;
}

/// Vector streaming stores whose alignment is their vector's size:
/// `store <N x float> ..., align A, ... !nontemporal` with A = 4N (x86
/// writes them whole).
int alignedVectorStreamingStores(const std::filesystem::path& dir) {
  return linesInOptimizedDumps(dir, [](const std::string& line) {
    if (!isVectorStreamingStore(line)) return false;
    const size_t vec = line.find("store <"), align = line.find(", align ");
    if (align == std::string::npos || line.compare(line.find(" x ", vec), 9, " x float>") != 0) return false;
    return std::stol(line.substr(align + 8)) == 4 * std::stol(line.substr(vec + 7));
  });
}

/// Pins the last-level cache the compiler plans streaming stores for
/// (StreamingStores.h): the tests below then decide the same on a 2-core
/// Zen 3 (32 MiB L3) as on a Xeon slice that reports 480 MiB.
class PinnedLastLevelCache {
 public:
  explicit PinnedLastLevelCache(int64_t bytes) { exec::setLastLevelCacheBytesForTesting(bytes); }
  ~PinnedLastLevelCache() { exec::setLastLevelCacheBytesForTesting(0); }
  PinnedLastLevelCache(const PinnedLastLevelCache&) = delete;
  PinnedLastLevelCache& operator=(const PinnedLastLevelCache&) = delete;
};

TEST(Tiering, LargeOutputsAreWrittenWithStreamingStores) {
  PinnedLastLevelCache llc(int64_t{32} << 20);
  // a * b + c over 2^23 floats: its 32 MiB result is only written, so the
  // vectorised loop's stores are non-temporal (they skip reading each line
  // before writing it), fenced before the code that wrote them returns. So
  // are those of chain8's long body of tanh and sigmoid polynomials. A
  // result below the size keeps plain stores.
  DumpDirectory dir("kiln-dump-streaming-test");
  const int64_t n = int64_t{1} << 23;
  Tensor a = rand({n}, 41, DType::f32, -1, 1), b = rand({n}, 42, DType::f32, -1, 1), c = rand({n}, 43, DType::f32, -1, 1);
  Tensor small = rand({4096}, 44, DType::f32, -1, 1);
  kiln::sync();
  auto run = [&] {
    Tensor big = a * b + c;
    Tensor heavy = tanh((b * 1.5 + 0.5) * sigmoid(b)) + b * b;
    Tensor little = small * small + small;
    return std::tuple{big.to_vector<float>(), heavy.to_vector<float>(), little.to_vector<float>()};
  };
  std::tuple<std::vector<float>, std::vector<float>, std::vector<float>> reference;
  {
    JitScope off(JitMode::Off);
    reference = run();
  }
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  std::tuple<std::vector<float>, std::vector<float>, std::vector<float>> compiled;
  {
    JitScope sync(JitMode::Sync, 1);
    reset_stats();
    compiled = run();
    EXPECT_GE(stats().compiled_runs, 1u);
  }
  unsetenv("KILN_DUMP_IR");
  expectClose(std::get<0>(compiled), std::get<0>(reference), 1e-6f);
  expectClose(std::get<1>(compiled), std::get<1>(reference), 1e-5f);
  expectClose(std::get<2>(compiled), std::get<2>(reference), 1e-6f);
  EXPECT_GE(linesInOptimizedDumps(dir, isVectorStreamingStore), 1) << "the 32 MiB result's vector stores are plain";
  // The loop is flat, but its chunks start at multiples of 16 elements
  // (ParallelChunks.h): the clone for an aligned result writes whole vectors.
  EXPECT_GE(countInDumps(dir, "5-optimized.ll", ".aligned_streaming("), 1) << "no aligned clone";
  EXPECT_GE(alignedVectorStreamingStores(dir), 1) << "no vector streaming store is known to be aligned";
#if defined(__x86_64__)
  // Fenced where the compiled code hands over (the parallel body's return).
  EXPECT_GE(countInDumps(dir, "5-optimized.ll", "call void @llvm.x86.sse.sfence()"), 1);
#endif
  EXPECT_EQ(countInDumps(dir, "3-loops", "{nontemporal = true} : memref<4096xf32>"), 0) << "a 16 KiB result streams";
  EXPECT_EQ(countInDumps(dir, "3-loops", "{nontemporal = true} : memref<8388608xf32>"), 2)
      << "both 32 MiB results stream, the long body's too";
}

TEST(Tiering, StreamedRowsKeepTheirRowBufferAndStoreAligned) {
  PinnedLastLevelCache llc(int64_t{32} << 20);
  // softmax over [4096, 1024]: a 16 MiB result, written by its last row loop
  // only. The exp row stays in an L1 row buffer (not written into the result
  // row and scaled there), the last loop streams the row out, and the
  // parallel body tests the result's alignment on entry to run a clone whose
  // vector streaming stores LLVM proved aligned (vmovntps, not 8-byte pieces).
  DumpDirectory dir("kiln-dump-aligned-streaming-test");
  Tensor x = rand({4096, 1024}, 51, DType::f32, -4, 4);
  kiln::sync();
  const auto [reference, compiled, compiledRuns] =
      interpretedThenCompiled([&] { return softmax(x, -1).to_vector<float>(); }, dir);
  EXPECT_EQ(compiledRuns, 1u);
  expectClose(compiled, reference, 1e-6f);
  EXPECT_EQ(countInDumps(dir, "3-loops", "{nontemporal = true} : memref<4096x1024xf32>"), 1);
  EXPECT_EQ(countInDumps(dir, "3-loops", "memref.alloca() {alignment = 64 : i64} : memref<4096xi8>"), 1)
      << "the exp row is no longer a row buffer";
  EXPECT_GE(countInDumps(dir, "5-optimized.ll", ".aligned_streaming("), 1) << "no aligned clone";
  EXPECT_GE(alignedVectorStreamingStores(dir), 1) << "no vector streaming store is known to be aligned";
}

/// A softmax of the same size (another shape, so not the kernel above), on
/// a machine whose last-level cache holds what it reads and writes several
/// times over: its result stays in cache for the next kernel, so nothing
/// streams.
TEST(Tiering, OutputsThatFitTheLastLevelCacheKeepPlainStores) {
  PinnedLastLevelCache llc(int64_t{512} << 20);
  DumpDirectory dir("kiln-dump-cached-softmax-test");
  Tensor x = rand({2048, 2048}, 53, DType::f32, -4, 4);
  kiln::sync();
  const auto [reference, compiled, compiledRuns] =
      interpretedThenCompiled([&] { return softmax(x, -1).to_vector<float>(); }, dir);
  EXPECT_EQ(compiledRuns, 1u);
  expectClose(compiled, reference, 1e-6f);
  EXPECT_EQ(countInDumps(dir, "3-loops", "nontemporal"), 0);
  EXPECT_EQ(linesInOptimizedDumps(dir, isVectorStreamingStore), 0);
  EXPECT_GE(countInDumps(dir, "3-loops", "memref<2048x2048xf32>"), 1) << "not the softmax kernel";
}

TEST(Tiering, StreamedRowsIntoAMisalignedBufferTakeTheUnalignedPath) {
  PinnedLastLevelCache llc(int64_t{32} << 20);
  // w = w * 0.5 + 1 over [4096, 1024] rows, computed in place of w (buffer
  // donation), whose data starts 4 bytes into its allocation: the kernel
  // streams its rows out and has a clone for aligned buffers, but the
  // entry's test sends this buffer down the path that assumes nothing (an
  // aligned vmovntps there would fault).
  DumpDirectory dir("kiln-dump-misaligned-streaming-test");
  constexpr int64_t kRows = 4096, kCols = 1024;
  auto misaligned = [&] {
    JitScope off(JitMode::Off);  // a view (a compiled slice would be a copy)
    // On the host, whatever the default device: its address is the test.
    Tensor base = rand({kRows * kCols + 1}, 52, DType::f32, -4, 4, Device::cpu()) * 1.0f;
    kiln::sync();
    Tensor w = reshape(slice(base, 0, 1, kRows * kCols + 1), {kRows, kCols});
    kiln::sync();
    return w;
  };
  Tensor w = misaligned();
  ASSERT_NE(reinterpret_cast<std::uintptr_t>(w.data()) % 32, 0u) << "the buffer is aligned after all";
  std::vector<float> expect = w.to_vector<float>();
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  JitScope sync(JitMode::Sync, 1);
  reset_stats();
  for (int i = 0; i < 3; ++i) {
    w = w * 0.5f + 1.0f;
    kiln::step();
    for (float& e : expect) e = e * 0.5f + 1.0f;
  }
  unsetenv("KILN_DUMP_IR");
  EXPECT_GE(stats().compiled_runs, 2u);
  EXPECT_GE(stats().donated_buffers, 1u) << "no run wrote into the misaligned buffer: " << stats().str();
  EXPECT_NE(reinterpret_cast<std::uintptr_t>(w.data()) % 32, 0u);
  const std::vector<std::string> dumps = dumpsOf(dir, "5-optimized.ll");
  EXPECT_FALSE(dumps.empty());
  for (const std::string& text : dumps)
    EXPECT_NE(text.find(".aligned_streaming("), std::string::npos) << "a kernel without an aligned clone";
  std::vector<float> got = w.to_vector<float>();
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], expect[i]) << i;
}

// An internal LLVM error (here raised by hand, as a pass that does not
// converge raises it) ends the process at once with Kiln's message: LLVM's
// own exit(1) ran the exit handlers while the program's threads ran on, and
// a test process hung in them instead of failing.
TEST(TieringDeathTest, InternalLlvmErrorAbortsWithKilnsMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Data d;
        JitScope sync(JitMode::Sync, 2);
        for (int i = 0; i < 3; ++i) stepOnce(d.x, d.w, d.b, 0.5f);
        if (stats().compiles != 1) std::_Exit(3);  // the compiler library (and LLVM) must be loaded
        std::string path;  // the libLLVM the compiler library loaded
        dl_iterate_phdr(
            [](dl_phdr_info* info, size_t, void* out) {
              const std::string name = info->dlpi_name ? info->dlpi_name : "";
              if (name.find("/libLLVM") == std::string::npos) return 0;
              *static_cast<std::string*>(out) = name;
              return 1;
            },
            &path);
        void* llvm = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (!llvm) std::_Exit(4);
        using Report = void (*)(const char*);
        auto report = reinterpret_cast<Report>(dlsym(llvm, "_ZN4llvm21reportFatalUsageErrorEPKc"));
        if (!report) std::_Exit(5);
        report("Instruction Combining did not reach a fixpoint");
        std::_Exit(6);  // not reached: LLVM's error does not return
      },
      "kiln: the kernel compiler hit an internal LLVM error: Instruction Combining did not reach a fixpoint\n"
      "kiln: set KILN_JIT=off");
}

}  // namespace
}  // namespace kiln
