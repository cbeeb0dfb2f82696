// Several user threads record and run traces at once while hot traces compile
// in the background: a key shared by all threads (compiled once, then run
// compiled by all), a key per thread, tensors handed between threads while
// still pending (cross-thread flushes), short-lived threads that exit with
// pending work (their recorders are recycled), the disk kernel cache written
// and read at once, and counters and last trace keys read meanwhile. Every result must equal the
// interpreter's. scripts/tsan.sh runs this under ThreadSanitizer.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "test/unit/exec/TrainingStep.h"
#include "runtime/exec/Engine.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr int kThreads = 4;

bool close(const std::vector<float>& got, const std::vector<float>& want, float tol = 2e-5f) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) return false;
  return true;
}

/// Async JIT with two compile threads and the disk cache in a private
/// directory, for one scope.
class ConcurrentJit {
 public:
  ConcurrentJit() : saved_(settings()) {
    std::string t = (fs::temp_directory_path() / "kiln-concurrency-test-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    Settings s = saved_;
    s.jit = JitMode::Async;
    s.jit_threshold = 2;
    s.compile_threads = 2;  // read when the compile queue starts: this binary's first compile
    s.max_shapes = 64;      // nine sizes of one step structure: all get kernels
    s.cache = "on";
    s.cache_dir = dir_;
    set_settings(s);
  }
  ~ConcurrentJit() {
    exec::Engine::instance().drainCompiles();
    set_settings(saved_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ConcurrentJit(const ConcurrentJit&) = delete;
  ConcurrentJit& operator=(const ConcurrentJit&) = delete;

 private:
  Settings saved_;
  std::string dir_;
};

/// A pending tensor one thread leaves for its neighbour.
struct Slot {
  std::mutex mutex;
  std::optional<Tensor> tensor;
};

TEST(Concurrency, ThreadsRecordRunAndHandOffWhileTracesCompile) {
  Tensor w = rand({19, 23}, 2, DType::f32, -1, 1);
  Tensor b = rand({23}, 3, DType::f32, -1, 1);
  Tensor shared = rand({37, 19}, 1, DType::f32, -1, 1);
  std::vector<Tensor> own, later;
  for (int t = 0; t < kThreads; ++t) {
    own.push_back(rand({8 + t, 19}, 10 + t, DType::f32, -1, 1));
    later.push_back(rand({20 + t, 19}, 20 + t, DType::f32, -1, 1));
  }
  sync();

  // References from the interpreter alone.
  std::vector<float> refShared;
  std::vector<std::vector<float>> refOwn(kThreads), refLater(kThreads);
  std::vector<float> refHandOff(kThreads), refExit(kThreads);
  {
    Settings saved = settings(), off = saved;
    off.jit = JitMode::Off;
    set_settings(off);
    refShared = stepOnce(shared, w, b);
    for (int t = 0; t < kThreads; ++t) {
      refOwn[t] = stepOnce(own[t], w, b);
      refLater[t] = stepOnce(later[t], w, b);
      refHandOff[t] = sum(own[t] * 2.0f + 1.0f).item<float>();
      refExit[t] = sum(own[t] * 3.0f).item<float>();
    }
    set_settings(saved);
  }

  ConcurrentJit jit;
  reset_stats();
  std::atomic<int> mismatches{0};
  std::atomic<uint64_t> counterReads{0};
  std::vector<Slot> slots(kThreads);

  // Phase 1: everything at once while the first compilations run.
  constexpr int kIters = 24;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const float handOffTol = 1e-4f;
        for (int i = 0; i < kIters; ++i) {
          if (!close(stepOnce(shared, w, b), refShared)) ++mismatches;
          if (!close(stepOnce(own[t], w, b), refOwn[t])) ++mismatches;

          // One hand-off that is pending for sure (the ring below depends on
          // timing: on the test device the threads mostly wait on its stream).
          if (i == 0) {
            Tensor p = own[t] * 2.0f + 1.0f;
            float got = 0;
            std::thread([&] { got = sum(p).item<float>(); }).join();
            if (!close({got}, {refHandOff[t]}, handOffTol)) ++mismatches;
          }

          // Leave a pending tensor for the next thread and use the previous
          // thread's: when it is still pending, this flushes that thread's
          // recorder from here, possibly while it is recording.
          {
            Tensor p = own[t] * 2.0f + 1.0f;
            std::lock_guard<std::mutex> lock(slots[t].mutex);
            slots[t].tensor = p;
          }
          const int from = (t + kThreads - 1) % kThreads;
          std::optional<Tensor> q;
          {
            std::lock_guard<std::mutex> lock(slots[from].mutex);
            q = slots[from].tensor;
          }
          if (q && !close({sum(*q).item<float>()}, {refHandOff[from]}, handOffTol)) ++mismatches;
          // Our recorder's last key, while the next thread may be flushing
          // this recorder to read `p`.
          if (exec::Engine::lastKey().words.empty()) ++mismatches;

          // A thread that exits with pending work: its recorder is flushed at
          // exit and recycled for a later thread.
          if (i % 6 == 0) {
            Tensor r;
            std::thread([&] { r = own[t] * 3.0f; }).join();
            if (!close({sum(r).item<float>()}, {refExit[t]}, handOffTol)) ++mismatches;
          }
          Stats s = stats();
          counterReads.fetch_add(s.traces_recorded > 0, std::memory_order_relaxed);
          step();
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  for (Slot& s : slots) s.tensor.reset();
  exec::Engine::instance().drainCompiles();
  Stats afterFirst = stats();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(counterReads.load(), static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(afterFirst.compile_failures, 0u) << afterFirst.str();
  EXPECT_GE(afterFirst.compiles, static_cast<uint64_t>(1 + kThreads))
      << "the shared key and each thread's own key are hot\n" << afterFirst.str();
  EXPECT_GT(afterFirst.flushes_cross_thread, 0u) << afterFirst.str();

  // Phase 2: the keys of phase 1 run compiled in every thread at once (kernel
  // cache lookups and launches in parallel) while each thread's new size is
  // compiled in the background.
  constexpr int kIters2 = 8;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kIters2; ++i) {
          if (!close(stepOnce(shared, w, b), refShared)) ++mismatches;
          if (!close(stepOnce(own[t], w, b), refOwn[t])) ++mismatches;
          if (!close(stepOnce(later[t], w, b), refLater[t])) ++mismatches;
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  exec::Engine::instance().drainCompiles();
  Stats end = stats();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(end.compile_failures, 0u) << end.str();
  EXPECT_GE(end.compiles, afterFirst.compiles + kThreads) << "each thread's new size compiled\n" << end.str();
  EXPECT_GE(end.compiled_runs - afterFirst.compiled_runs, static_cast<uint64_t>(2 * kThreads * kIters2))
      << "the shared and own keys run compiled\n" << end.str();
}

}  // namespace
}  // namespace kiln
