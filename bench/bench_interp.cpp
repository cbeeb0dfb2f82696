// Interpreter (tier 0) benchmarks. Each Kiln figure is paired with a peer
// measured in the same run (a hand-written loop over the same buffers), so
// RESULTS.md reports ratios, not absolute times.
#include <benchmark/benchmark.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <vector>

#include "kiln/kiln.h"
#include "runtime/trace/Recorder.h"

using namespace kiln;

namespace {

/// Recording one op on a pending value: no kernel runs.
void BM_RecordOp(benchmark::State& state) {
  Tensor x = from_vector<float>({1}, {1});
  Tensor y = x;
  int64_t n = 0;
  for (auto _ : state) {
    y = exp(y);
    if (++n % 2000 == 0) {
      state.PauseTiming();
      kiln::sync();
      y = x;
      state.ResumeTiming();
    }
  }
  kiln::sync();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordOp);

/// Recording and interpreting one op on a 1-element tensor, per op.
void BM_RecordAndInterpretTinyOp(benchmark::State& state) {
  Tensor x = from_vector<float>({1}, {1});
  Tensor y = x;
  const int chain = 64;
  for (auto _ : state) {
    y = x;
    for (int i = 0; i < chain; ++i) y = y * 1.0001f;
    kiln::sync();
  }
  state.SetItemsProcessed(state.iterations() * chain * 2);  // mul + its constant
}
BENCHMARK(BM_RecordAndInterpretTinyOp);

constexpr int64_t kBig = int64_t{1} << 24;

/// Interpreted a*b+c on 2^24 f32.
void BM_InterpretFma(benchmark::State& state) {
  Tensor a = rand({kBig}, 1), b = rand({kBig}, 2), c = rand({kBig}, 3);
  kiln::sync();
  for (auto _ : state) {
    Tensor r = a * b + c;
    kiln::sync();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 4);
}
BENCHMARK(BM_InterpretFma)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Peer: the same a*b+c as one hand-written TBB loop (writes a fresh output
/// each time from a reused buffer, like Kiln's caching allocator).
void BM_HandLoopFma(benchmark::State& state) {
  std::vector<float> a(kBig, 1.0f), b(kBig, 2.0f), c(kBig, 3.0f), r(kBig);
  for (auto _ : state) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, kBig, 1 << 15), [&](const tbb::blocked_range<int64_t>& rg) {
      for (int64_t i = rg.begin(); i < rg.end(); ++i) r[i] = a[i] * b[i] + c[i];
    });
    benchmark::DoNotOptimize(r.data());
  }
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 4);
}
BENCHMARK(BM_HandLoopFma)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Interpreted SGEMM 1024^3.
void BM_InterpretMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = rand({n, n}, 1), b = rand({n, n}, 2);
  kiln::sync();
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    kiln::sync();
    benchmark::DoNotOptimize(c);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_InterpretMatmul)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
