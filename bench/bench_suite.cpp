// Kiln benchmark suite (issue 8): every workload for Kiln and for the native
// peers (hand-fused C++ loops, Eigen, OpenBLAS, oneDNN), plus the machine's
// own limits (STREAM copy/triad, peak FP32 FMA), as Google Benchmark rows
// named "workload/system". scripts/bench.sh runs this binary several times
// (once per Kiln tier, once for the BLAS rows) in alternating rounds with the
// Python peers (bench/peers.py) and writes bench/RESULTS.md from the samples.
//
//   kiln_bench [--tier=interp|compiled] [--systems=kiln,hand,eigen,openblas,onednn,machine]
//              [--quick] [Google Benchmark flags]
//   kiln_bench --first-step --tier=interp|compiled|replay
//
// --tier picks how the Kiln rows run: interp sets KILN_JIT=off, compiled sets
// KILN_JIT=sync with threshold 1 (compiled in the calling thread on the first
// run, before timing). A compiled row whose trace did not compile is reported
// as an error, never timed on the interpreter.
#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"

#ifdef KILN_BENCH_HAVE_EIGEN
#include <Eigen/Core>
#endif
#ifdef KILN_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_BENCH_HAVE_DNNL
#include <dnnl.h>

#include "bench/resnet_onednn.h"
#endif

using namespace kiln;

namespace {

std::string gTier = "interp";
std::set<std::string> gSystems = {"kiln", "hand", "eigen", "openblas", "onednn", "machine"};
bool gQuick = false;
constexpr int kThreads = 2;  // the machine's cores; every parallel peer uses this many

std::string kilnName() { return "kiln-" + gTier; }

/// A 64-byte aligned float buffer, first touched by the threads that use it.
struct Buf {
  float* p = nullptr;
  int64_t n = 0;
  explicit Buf(int64_t count) : n(count) {
    p = static_cast<float*>(std::aligned_alloc(64, ((count * 4 + 63) / 64) * 64));
  }
  ~Buf() { std::free(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

void fillRandom(float* p, int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.f;
  }
}

tbb::task_arena& arena() {
  static tbb::task_arena a(kThreads);
  return a;
}

/// Runs f(begin, end) over [0, n) split into `kThreads` static chunks.
template <class F>
void parallelChunks(int64_t n, int threads, F&& f) {
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  arena().execute([&] {
    tbb::parallel_for(0, threads, [&](int t) {
      int64_t b = n * t / threads, e = n * (t + 1) / threads;
      f(b, e);
    }, tbb::static_partitioner());
  });
}

// ---------------------------------------------------------------- hand-fused maths
// Polynomial exp for softmax (Cody-Waite reduction, degree-7 Horner, 2^n through the
// exponent bits): branch-free, so GCC vectorises the loops that use it.
inline float fastExp(float x) {
  x = x < -87.f ? -87.f : x;  // branch-free with -fno-trapping-math
  x = x > 88.f ? 88.f : x;
  const float n = __builtin_floorf(x * 1.44269504f);
  float f = x - n * 0.693145752f;
  f -= n * 1.42860677e-6f;
  float p = 1.f / 5040;
  p = p * f + 1.f / 720;
  p = p * f + 1.f / 120;
  p = p * f + 1.f / 24;
  p = p * f + 1.f / 6;
  p = p * f + 0.5f;
  p = p * f + 1.f;
  p = p * f + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}
/// Rational tanh (Eigen's float coefficients, max abs error 3e-7): one
/// division, no exp; sigmoid(x) = 0.5 + 0.5 tanh(x/2). About 2x faster here
/// than tanh/sigmoid through the polynomial exp.
inline float ratTanh(float x) {
  x = x < -7.90531110763549805f ? -7.90531110763549805f : x;
  x = x > 7.90531110763549805f ? 7.90531110763549805f : x;
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}
inline float ratSigmoid(float x) { return 0.5f + 0.5f * ratTanh(0.5f * x); }

inline float chainScalar(float x) { return ratTanh((x * 1.5f + 0.5f) * ratSigmoid(x)) + x * x; }

Tensor chainKiln(const Tensor& x) { return tanh((x * 1.5f + 0.5f) * sigmoid(x)) + x * x; }

constexpr int64_t kBig = int64_t{1} << 24;
constexpr int64_t kRows = 4096, kCols = 1024;

// ---------------------------------------------------------------- Kiln helpers
void configureKiln() {
  Settings s = settings();
  s.jit = gTier == "compiled" ? JitMode::Sync : gTier == "replay" ? JitMode::Replay : JitMode::Off;
  s.jit_threshold = 1;
  set_settings(s);
}

/// Runs `body` (records and syncs one iteration) a few times before timing; for
/// the compiled tier, checks the last warm-up ran compiled code.
template <class F>
bool kilnWarm(benchmark::State& state, F&& body, int warm = 3) {
  auto unsettled = [] {
    const Stats s = stats();
    return s.tune_sites - s.tune_sites_settled;
  };
  const uint64_t unsettledBefore = unsettled();
  for (int i = 0; i < warm; ++i) body();
  exec::Engine::instance().drainCompiles();
  if (gTier == "compiled") {
    const uint64_t before = stats().compiled_runs;
    body();
    if (stats().compiled_runs == before) {
      state.SkipWithError("trace did not compile (runs interpreted; see KILN_LOG=info)");
      return false;
    }
  }
  // Tier 2 (KILN_TUNE): the row's hot GEMM shapes finish their trials before
  // the timed runs, as in a long-running loop (at most 64 runs or 20 s).
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 64 && unsettled() > unsettledBefore &&
                  std::chrono::steady_clock::now() - start < std::chrono::seconds(20);
       ++i)
    body();
  return true;
}

Tensor kilnRand(const Shape& shape, uint64_t seed, double lo = -2, double hi = 2) {
  Tensor t = rand(shape, seed, DType::f32, lo, hi);
  kiln::sync();
  return t;
}

// ---------------------------------------------------------------- elementwise
void BM_ChainKiln(benchmark::State& state) {
  Tensor x = kilnRand({kBig}, 1);
  Tensor r;
  auto body = [&] {
    r = chainKiln(x);
    kiln::sync();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
}

void BM_ChainHand(benchmark::State& state) {
  Buf x(kBig), out(kBig);
  parallelChunks(kBig, kThreads, [&](int64_t b, int64_t e) { fillRandom(x.p + b, e - b, 1 + b); });
  auto run = [&] {
    parallelChunks(kBig, kThreads, [&](int64_t b, int64_t e) {
      const float* __restrict xp = x.p;
      float* __restrict op = out.p;
      for (int64_t i = b; i < e; ++i) op[i] = chainScalar(xp[i]);
    });
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out.p);
  }
}

#ifdef KILN_BENCH_HAVE_EIGEN
void BM_ChainEigen(benchmark::State& state) {
  Buf x(kBig), out(kBig);
  parallelChunks(kBig, kThreads, [&](int64_t b, int64_t e) { fillRandom(x.p + b, e - b, 1 + b); });
  auto run = [&] {
    parallelChunks(kBig, kThreads, [&](int64_t b, int64_t e) {
      Eigen::Map<const Eigen::ArrayXf> xa(x.p + b, e - b);
      Eigen::Map<Eigen::ArrayXf> oa(out.p + b, e - b);
      oa = ((xa * 1.5f + 0.5f) * xa.logistic()).tanh() + xa.square();  // one fused expression
    });
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out.p);
  }
}
#endif

void BM_FmaKiln(benchmark::State& state) {
  Tensor a = kilnRand({kBig}, 1), b = kilnRand({kBig}, 2), c = kilnRand({kBig}, 3);
  Tensor r;
  auto body = [&] {
    r = a * b + c;
    kiln::sync();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
}

void BM_FmaHand(benchmark::State& state) {
  Buf a(kBig), b(kBig), c(kBig), r(kBig);
  parallelChunks(kBig, kThreads, [&](int64_t s, int64_t e) {
    fillRandom(a.p + s, e - s, 1);
    fillRandom(b.p + s, e - s, 2);
    fillRandom(c.p + s, e - s, 3);
    std::fill(r.p + s, r.p + e, 0.f);
  });
  for (auto _ : state) {
    parallelChunks(kBig, kThreads, [&](int64_t s, int64_t e) {
      const float *__restrict ap = a.p, *__restrict bp = b.p, *__restrict cp = c.p;
      float* __restrict rp = r.p;
      for (int64_t i = s; i < e; ++i) rp[i] = ap[i] * bp[i] + cp[i];
    });
    benchmark::DoNotOptimize(r.p);
  }
}

// ---------------------------------------------------------------- softmax / layer_norm
void BM_SoftmaxKiln(benchmark::State& state) {
  Tensor x = kilnRand({kRows, kCols}, 4);
  Tensor r;
  auto body = [&] {
    r = softmax(x, -1);
    kiln::sync();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
}

void BM_LayerNormKiln(benchmark::State& state) {
  Tensor x = kilnRand({kRows, kCols}, 5);
  Tensor r;
  auto body = [&] {
    r = layer_norm(x);
    kiln::sync();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
}

void softmaxRows(const float* x, float* out, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* __restrict xr = x + r * kCols;
    float* __restrict orow = out + r * kCols;
    // `omp simd` (with -fopenmp-simd, no OpenMP runtime) lets the reductions vectorise.
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < kCols; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < kCols; ++j) {
      orow[j] = fastExp(xr[j] - m);
      s += orow[j];
    }
    const float inv = 1.f / s;
    for (int64_t j = 0; j < kCols; ++j) orow[j] *= inv;
  }
}

void layerNormRows(const float* x, float* out, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* __restrict xr = x + r * kCols;
    float* __restrict orow = out + r * kCols;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < kCols; ++j) s += xr[j];
    const float mean = s / kCols;
    float v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < kCols; ++j) v += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = 1.f / std::sqrt(v / kCols + 1e-5f);
    for (int64_t j = 0; j < kCols; ++j) orow[j] = (xr[j] - mean) * rstd;
  }
}

template <void (*Rows)(const float*, float*, int64_t, int64_t)>
void BM_RowsHand(benchmark::State& state) {
  Buf x(kRows * kCols), out(kRows * kCols);
  parallelChunks(kRows, kThreads, [&](int64_t b, int64_t e) {
    fillRandom(x.p + b * kCols, (e - b) * kCols, 4 + b);
    std::fill(out.p + b * kCols, out.p + e * kCols, 0.f);
  });
  for (auto _ : state) {
    parallelChunks(kRows, kThreads, [&](int64_t b, int64_t e) { Rows(x.p, out.p, b, e); });
    benchmark::DoNotOptimize(out.p);
  }
}

// ---------------------------------------------------------------- matmul
/// C = A * B in `T`: f32, or bf16 operands and result with f32 sums (the
/// CPU's bf16 units where it has them).
template <DType T>
void BM_MatmulKiln(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Tensor a = cast(kilnRand({m, k}, 6, -1, 1), T), b = cast(kilnRand({k, n}, 7, -1, 1), T);
  kiln::sync();
  Tensor c;
  auto body = [&] {
    c = matmul(a, b);
    kiln::sync();
  };
  if (!kilnWarm(state, body, 1)) return;
  for (auto _ : state) body();
}

void BM_MatmulBiasReluKiln(benchmark::State& state) {
  const int64_t n = 1024;
  Tensor a = kilnRand({n, n}, 8, -1, 1), w = kilnRand({n, n}, 9, -1, 1), bias = kilnRand({n}, 10, -1, 1);
  Tensor c;
  auto body = [&] {
    c = relu(matmul(a, w) + bias);
    kiln::sync();
  };
  if (!kilnWarm(state, body, 2)) return;
  for (auto _ : state) body();
}

#ifdef KILN_BENCH_HAVE_OPENBLAS
void BM_MatmulOpenBlas(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Buf a(m * k), b(k * n), c(m * n);
  fillRandom(a.p, m * k, 6, -1, 1);
  fillRandom(b.p, k * n, 7, -1, 1);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a.p, k, b.p, n, 0.f, c.p, n);
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(c.p);
  }
}

/// Matmul + bias + ReLU the way a C++ user would write it: OpenBLAS SGEMM,
/// then one hand-written bias+ReLU pass over the output.
void BM_MatmulBiasReluOpenBlas(benchmark::State& state) {
  const int64_t n = 1024;
  Buf a(n * n), w(n * n), bias(n), c(n * n);
  fillRandom(a.p, n * n, 8, -1, 1);
  fillRandom(w.p, n * n, 9, -1, 1);
  fillRandom(bias.p, n, 10, -1, 1);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.p, n, w.p, n, 0.f, c.p, n);
    parallelChunks(n, kThreads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) c.p[r * n + j] = std::max(c.p[r * n + j] + bias.p[j], 0.f);
    });
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(c.p);
  }
}
#endif

#ifdef KILN_BENCH_HAVE_DNNL
/// oneDNN's bf16 GEMM: its matmul primitive on plain row-major bf16 operands
/// (so it packs them on every call, as Kiln does) into f32; AMX or AVX-512
/// BF16 where the CPU has them (DNNL_VERBOSE=1 names the implementation).
void BM_MatmulBf16Dnnl(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Buf af(m * k), bf(k * n), c(m * n);
  fillRandom(af.p, m * k, 6, -1, 1);
  fillRandom(bf.p, k * n, 7, -1, 1);
  std::vector<uint16_t> a(m * k), b(k * n);
  auto toBf16 = [](float f) {  // round to nearest even (no NaNs here)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  };
  for (int64_t i = 0; i < m * k; ++i) a[i] = toBf16(af.p[i]);
  for (int64_t i = 0; i < k * n; ++i) b[i] = toBf16(bf.p[i]);
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t am = nullptr, bm = nullptr, cm = nullptr;
  dnnl_memory_desc_t aMd, bMd, cMd;
  dnnl_matmul_desc_t desc;
  const dnnl_dims_t aDims = {m, k}, bDims = {k, n}, cDims = {m, n};
  const bool ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
                  dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success &&
                  dnnl_memory_desc_init_by_tag(&aMd, 2, aDims, dnnl_bf16, dnnl_ab) == dnnl_success &&
                  dnnl_memory_desc_init_by_tag(&bMd, 2, bDims, dnnl_bf16, dnnl_ab) == dnnl_success &&
                  dnnl_memory_desc_init_by_tag(&cMd, 2, cDims, dnnl_f32, dnnl_ab) == dnnl_success &&
                  dnnl_matmul_desc_init(&desc, &aMd, &bMd, nullptr, &cMd) == dnnl_success &&
                  dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) == dnnl_success &&
                  dnnl_primitive_create(&prim, pd) == dnnl_success &&
                  dnnl_memory_create(&am, &aMd, engine, a.data()) == dnnl_success &&
                  dnnl_memory_create(&bm, &bMd, engine, b.data()) == dnnl_success &&
                  dnnl_memory_create(&cm, &cMd, engine, c.p) == dnnl_success;
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  auto run = [&] {
    return dnnl_primitive_execute(prim, stream, 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  };
  if (!ok || !run()) {
    state.SkipWithError("oneDNN bf16 matmul failed");
  } else {
    for (auto _ : state) {
      run();
      benchmark::DoNotOptimize(c.p);
    }
  }
  for (dnnl_memory_t mem : {am, bm, cm})
    if (mem) dnnl_memory_destroy(mem);
  if (prim) dnnl_primitive_destroy(prim);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (stream) dnnl_stream_destroy(stream);
  if (engine) dnnl_engine_destroy(engine);
}

void BM_MatmulDnnl(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Buf a(m * k), b(k * n), c(m * n);
  fillRandom(a.p, m * k, 6, -1, 1);
  fillRandom(b.p, k * n, 7, -1, 1);
  auto run = [&] {
    if (dnnl_sgemm('N', 'N', m, n, k, 1.f, a.p, k, b.p, n, 0.f, c.p, n) != dnnl_success)
      state.SkipWithError("dnnl_sgemm failed");
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(c.p);
  }
}
#endif

// ---------------------------------------------------------------- MLP training step
/// MLP 784-512-512-10, batch 256, synthetic data, Adam: one step() records
/// forward, backward and update as one trace.
struct Mlp {
  static constexpr int64_t kBatch = 256;
  Tensor w1 = randn({784, 512}, 11, DType::f32, 0, std::sqrt(2.0 / 784)), b1 = zeros({512});
  Tensor w2 = randn({512, 512}, 12, DType::f32, 0, std::sqrt(2.0 / 512)), b2 = zeros({512});
  Tensor w3 = randn({512, 10}, 13, DType::f32, 0, std::sqrt(2.0 / 512)), b3 = zeros({10});
  Tensor x = randn({kBatch, 784}, 14);
  Tensor y = cast(floor(rand({kBatch}, 15) * 10.0), DType::i64);
  std::unique_ptr<optim::Adam> opt;
  Tensor loss;
  /// Decay the learning rate every step (set_lr): a new constant per step,
  /// which becomes a kernel argument (runtime/exec/ScalarArgs.h).
  bool schedule = false;
  int64_t steps = 0;
  Mlp() {
    kiln::sync();
    opt = std::make_unique<optim::Adam>(std::vector<Tensor*>{&w1, &b1, &w2, &b2, &w3, &b3},
                                        optim::AdamOptions{.lr = 1e-3});
  }
  void step() {
    if (schedule) opt->set_lr(1e-3 * std::pow(0.999, static_cast<double>(++steps)));
    Tensor h = relu(matmul(x, w1) + b1);
    h = relu(matmul(h, w2) + b2);
    loss = cross_entropy(matmul(h, w3) + b3, y);
    loss.backward();
    opt->step();
    kiln::step();
    kiln::sync();
  }
};

void BM_MlpKiln(benchmark::State& state) {
  Mlp mlp;
  if (!kilnWarm(state, [&] { mlp.step(); }, 3)) return;
  for (auto _ : state) mlp.step();
  if (!std::isfinite(mlp.loss.item<float>())) state.SkipWithError("loss is not finite");
}

/// mlp_lr_schedule: the MLP step with a learning rate that decays every step.
/// Its compiled tier must compile during the warm-up only (the changing lr is
/// a kernel argument), so it runs as fast as mlp_train_step.
void BM_MlpScheduleKiln(benchmark::State& state) {
  Mlp mlp;
  mlp.schedule = true;
  if (!kilnWarm(state, [&] { mlp.step(); }, 3)) return;
  const uint64_t compiles = stats().compiles;
  for (auto _ : state) mlp.step();
  if (!std::isfinite(mlp.loss.item<float>())) state.SkipWithError("loss is not finite");
  if (stats().compiles != compiles) state.SkipWithError("the step recompiled while its learning rate changed");
}

// ---------------------------------------------------------------- ResNet basic block
/// A ResNet basic block forward in inference mode: conv 3x3 (64 -> 64,
/// padding 1) + batch norm + ReLU, conv 3x3 + batch norm, + identity, ReLU;
/// batch 16, 56x56, NCHW (torchvision's BasicBlock in eval()).
struct ResnetBlock {
  static constexpr int64_t kBatch = 16, kChannels = 64, kSide = 56;
  Tensor x = randn({kBatch, kChannels, kSide, kSide}, 31);
  Tensor w1 = randn({kChannels, kChannels, 3, 3}, 32, DType::f32, 0, std::sqrt(2.0 / (9 * kChannels)));
  Tensor w2 = randn({kChannels, kChannels, 3, 3}, 33, DType::f32, 0, std::sqrt(2.0 / (9 * kChannels)));
  Tensor g1 = rand({kChannels}, 34, DType::f32, 0.5, 1.5), b1 = rand({kChannels}, 35, DType::f32, -0.1, 0.1);
  Tensor m1 = rand({kChannels}, 36, DType::f32, -0.1, 0.1), v1 = rand({kChannels}, 37, DType::f32, 0.5, 1.5);
  Tensor g2 = rand({kChannels}, 38, DType::f32, 0.5, 1.5), b2 = rand({kChannels}, 39, DType::f32, -0.1, 0.1);
  Tensor m2 = rand({kChannels}, 40, DType::f32, -0.1, 0.1), v2 = rand({kChannels}, 41, DType::f32, 0.5, 1.5);
  Tensor out;
  ResnetBlock() { kiln::sync(); }
  void forward() {
    Conv2dOptions same;
    same.padding = {1};
    Tensor h = relu(batch_norm(conv2d(x, w1, {}, same), g1, b1, m1, v1, /*training=*/false).y);
    h = batch_norm(conv2d(h, w2, {}, same), g2, b2, m2, v2, /*training=*/false).y;
    out = relu(add(h, x));
    kiln::sync();
  }
};

/// The same block's training step: batch statistics, backward to every
/// parameter, SGD update (torch: train(), loss.backward(), SGD.step()).
struct ResnetBlockTrain : ResnetBlock {
  std::unique_ptr<optim::SGD> opt;
  Tensor loss;
  ResnetBlockTrain() {
    for (Tensor* p : {&w1, &w2, &g1, &b1, &g2, &b2}) p->requires_grad();
    opt = std::make_unique<optim::SGD>(std::vector<Tensor*>{&w1, &w2, &g1, &b1, &g2, &b2},
                                       optim::SGDOptions{.lr = 1e-3});
  }
  /// The loss of the block's forward with batch statistics.
  Tensor forwardLoss() {
    Conv2dOptions same;
    same.padding = {1};
    Tensor h = relu(batch_norm(conv2d(x, w1, {}, same), g1, b1, {}, {}, /*training=*/true).y);
    h = batch_norm(conv2d(h, w2, {}, same), g2, b2, {}, {}, /*training=*/true).y;
    return mean(relu(add(h, x)));
  }
  void step() {
    loss = forwardLoss();
    loss.backward();
    opt->step();
    kiln::step();
    kiln::sync();
  }
};

void BM_ResnetBlockTrainKiln(benchmark::State& state) {
  ResnetBlockTrain block;
  if (!kilnWarm(state, [&] { block.step(); }, 3)) return;
  for (auto _ : state) block.step();
  if (!std::isfinite(block.loss.item<float>())) state.SkipWithError("loss is not finite");
}

void BM_ResnetBlockKiln(benchmark::State& state) {
  ResnetBlock block;
  if (!kilnWarm(state, [&] { block.forward(); }, 3)) return;
  for (auto _ : state) block.forward();
  state.counters["gflop_per_iter"] = 2.0 * 2 * ResnetBlock::kBatch * ResnetBlock::kChannels * ResnetBlock::kChannels *
                                     9 * ResnetBlock::kSide * ResnetBlock::kSide / 1e9;
}

#ifdef KILN_BENCH_HAVE_DNNL
/// The block's tensors as the oneDNN peer takes them (host copies).
kiln_bench::ResnetBlockData resnetBlockData(const ResnetBlock& b) {
  kiln_bench::ResnetBlockData d;
  auto host = [](const Tensor& t) { return t.to_vector<float>(); };
  d.x = host(b.x);
  d.w1 = host(b.w1), d.w2 = host(b.w2);
  d.g1 = host(b.g1), d.b1 = host(b.b1), d.m1 = host(b.m1), d.v1 = host(b.v1);
  d.g2 = host(b.g2), d.b2 = host(b.b2), d.m2 = host(b.m2), d.v2 = host(b.v2);
  return d;
}

/// The largest difference between `got` and `want` relative to want's
/// largest magnitude: a peer that computes something else is not timed.
double relativeError(const float* got, const std::vector<float>& want) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

/// The ResNet block natively in oneDNN (bench/resnet_onednn.h), checked
/// against Kiln's output on the same tensors before it is timed.
void BM_ResnetBlockDnnl(benchmark::State& state) {
  ResnetBlock reference;
  reference.forward();
  const std::vector<float> want = reference.out.to_vector<float>();
  try {
    kiln_bench::OnednnResnetBlock block(resnetBlockData(reference));
    if (const double err = relativeError(block.forward(), want); !(err <= 1e-3)) {
      state.SkipWithError(("oneDNN's block differs from Kiln's by " + std::to_string(err)).c_str());
      return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(block.forward());
  } catch (const std::exception& e) {  // dnnl::error
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return;
  }
  state.counters["gflop_per_iter"] = 2.0 * 2 * ResnetBlock::kBatch * ResnetBlock::kChannels * ResnetBlock::kChannels *
                                     9 * ResnetBlock::kSide * ResnetBlock::kSide / 1e9;
}

/// The block's training step natively in oneDNN; its first step's loss and
/// gradients are checked against Kiln's (autograd) on the same tensors.
void BM_ResnetBlockTrainDnnl(benchmark::State& state) {
  ResnetBlockTrain reference;
  const kiln_bench::ResnetBlockData data = resnetBlockData(reference);
  Tensor loss = reference.forwardLoss();
  loss.backward();
  const float wantLoss = loss.item<float>();
  try {
    kiln_bench::OnednnResnetBlock block(data);
    const float gotLoss = block.trainStep();
    const kiln_bench::ResnetBlockGrads got = block.lastGrads();
    const std::pair<const std::vector<float>*, const Tensor*> grads[] = {
        {&got.w1, &reference.w1}, {&got.w2, &reference.w2}, {&got.g1, &reference.g1},
        {&got.b1, &reference.b1}, {&got.g2, &reference.g2}, {&got.b2, &reference.b2}};
    double err = std::fabs(gotLoss - wantLoss) / std::max(std::fabs(wantLoss), 1e-30f);
    for (const auto& [mine, param] : grads)
      err = std::max(err, relativeError(mine->data(), param->grad().to_vector<float>()));
    // Loose: weight and batch-norm gradients are sums of 50176 terms whose
    // mean is near zero, where f32 leaves errors up to 3e-3 of their largest
    // value in Kiln's and 7e-3 in oneDNN's (b1's gradient), against float64
    // PyTorch; a wrong layout or mask errs by far more.
    if (!(err <= 2e-2)) {
      state.SkipWithError(("oneDNN's training step differs from Kiln's by " + std::to_string(err)).c_str());
      return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(block.trainStep());
  } catch (const std::exception& e) {  // dnnl::error
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}
#endif

/// --first-step: the latency of the first MLP training step of a fresh
/// process (recording, then interpreting, or loading its kernel from the disk
/// cache under KILN_JIT=replay), printed as one JSON line. --tier=compiled
/// also runs a few more steps, so that the step's kernel is compiled and
/// stored in the disk cache for a later replay process.
int firstStep() {
  Mlp mlp;
  const Stats before = stats();
  auto usage = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u;
  };
  auto systemSeconds = [](const rusage& u) { return u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6; };
  const rusage usage0 = usage();
  auto t0 = std::chrono::steady_clock::now();
  mlp.step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const rusage usage1 = usage();
  // Kernel time is mostly first-touch page zeroing: on these VMs it swings
  // from 5 to 200 ms when the host backs fresh memory slowly.
  const long firstFaults = usage1.ru_minflt - usage0.ru_minflt;
  const double firstSystem = systemSeconds(usage1) - systemSeconds(usage0);
  const Stats after = stats();
  if (gTier == "compiled")
    for (int i = 0; i < 3; ++i) mlp.step();
  // The next steps of the same process: what the first one is compared with.
  double next = 1e9;
  for (int i = 0; i < 3; ++i) {
    auto t1 = std::chrono::steady_clock::now();
    mlp.step();
    next = std::min(next, std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  }
  std::printf("{\"first_step_s\": %.9g, \"next_step_s\": %.9g, \"first_step_page_faults\": %ld, "
              "\"first_step_system_s\": %.4g, "
              "\"max_rss_kb\": %ld, \"cache_load_ms\": %.4g, \"compiled_runs\": %llu, \"cache_disk_hits\": %llu, "
              "\"warm_start_kernels\": %llu, \"warm_start_mb\": %.3g, \"loss\": %g}\n",
              s, next, firstFaults, firstSystem, usage().ru_maxrss, after.cache_load_ms - before.cache_load_ms,
              static_cast<unsigned long long>(after.compiled_runs - before.compiled_runs),
              static_cast<unsigned long long>(after.cache_disk_hits - before.cache_disk_hits),
              static_cast<unsigned long long>(after.warm_start_kernels),
              static_cast<double>(after.warm_start_bytes) / (1 << 20), static_cast<double>(mlp.loss.item<float>()));
  return 0;
}

// ---------------------------------------------------------------- hot regions
/// A recurrent loop h = tanh(h @ W + x_t @ U + b) (B 64, H 256, D 128), one
/// trace per iteration (the final h is read).
struct Rnn {
  static constexpr int64_t kB = 64, kH = 256, kD = 128, kMaxSteps = 60;
  Tensor w = kilnRand({kH, kH}, 21, -0.06, 0.06), u = kilnRand({kD, kH}, 22, -0.08, 0.08);
  Tensor b = kilnRand({kH}, 23, -0.1, 0.1), h0 = kilnRand({kB, kH}, 24, -1, 1);
  Tensor xs = kilnRand({kMaxSteps, kB, kD}, 25, -1, 1);
  Tensor h;
  void run(int steps) {
    h = h0;
    for (int t = 0; t < steps; ++t) {
      Tensor xt = reshape(slice(xs, 0, t, t + 1), {kB, kD});
      h = tanh(matmul(h, w) + matmul(xt, u) + b);
    }
    kiln::sync();
  }
};

/// rnn_varlen: 20-60 steps, a new pseudo-random trip count every iteration
/// (mean 40), so the trace changes from one iteration to the next. The
/// compiled tier runs the body on its hot-region kernel: whole-trace compiles
/// are switched off for this row (a trip count seen again would otherwise get
/// a whole-trace kernel of its own), so it measures region kernels alone.
void BM_RnnVarlenKiln(benchmark::State& state) {
  Rnn rnn;
  const bool compiled = gTier == "compiled";
  exec::Engine::instance().setTraceCompilesForTesting(!compiled);
  uint32_t seed = 12345;
  auto length = [&] {
    seed = seed * 1664525u + 1013904223u;
    return 20 + static_cast<int>((seed >> 8) % 41);
  };
  for (int i = 0; i < 3; ++i) rnn.run(length());
  exec::Engine::instance().drainCompiles();
  const Stats before = stats();
  rnn.run(length());
  if (compiled && stats().region_launches == before.region_launches) {
    state.SkipWithError("the loop body did not run on a region kernel (see KILN_LOG=info)");
  } else {
    for (auto _ : state) rnn.run(length());
  }
  exec::Engine::instance().setTraceCompilesForTesting(true);
  state.counters["steps_per_iter"] = 40;
}

/// rnn_fixed40: the same loop at a fixed 40 steps: the compiled tier runs one
/// whole-trace kernel (the reference for region kernels).
void BM_RnnFixedKiln(benchmark::State& state) {
  Rnn rnn;
  if (!kilnWarm(state, [&] { rnn.run(40); }, 2)) return;
  for (auto _ : state) rnn.run(40);
  state.counters["steps_per_iter"] = 40;
}

// ---------------------------------------------------------------- per-op and dispatch costs
/// Recording one op on a pending value: no kernel runs (per op).
void BM_RecordOp(benchmark::State& state) {
  Tensor x = from_vector<float>({1}, {1});
  kiln::sync();
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
}

/// Recording and running a chain of 64 ops on 1-element tensors, then one
/// sync; reported per op (counter per_iter = 64).
void BM_RecordRunTiny(benchmark::State& state) {
  Tensor x = from_vector<float>({1}, {1});
  kiln::sync();
  const int chain = 64;
  Tensor y;
  auto body = [&] {
    y = x;
    for (int i = 0; i < chain; ++i) y = y * 1.0001f;
    kiln::sync();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
  state.counters["per_iter"] = chain;
}

/// One kiln::step() of a small (4-op) trace on 1-element tensors: recording,
/// key lookup and launch (compiled) or interpretation.
void BM_Dispatch(benchmark::State& state) {
  Tensor x = from_vector<float>({1}, {1});
  kiln::sync();
  Tensor y;
  auto body = [&] {
    y = relu(x * 1.5f + 0.5f) * x;
    kiln::step();
  };
  if (!kilnWarm(state, body)) return;
  for (auto _ : state) body();
}

/// Compile latency of an elementwise trace of `ops` ops on [1024] f32: each
/// iteration records a structurally new trace (new constants, so a new
/// TraceKey) and compiles it synchronously; the time is the compiler's own
/// (stats().compile_ms), without the run.
void BM_CompileLatency(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  Tensor x = kilnRand({1024}, 16);
  static int salt = 0;
  for (auto _ : state) {
    ++salt;
    // Constants that vary between runs of one structure become kernel
    // arguments (ScalarArgs.h): start each iteration as a fresh process, so
    // the new constants make a new key and a new compilation.
    exec::Engine::instance().resetProfilesForTesting();
    Tensor y = x;
    for (int i = 0; i < ops; ++i) {
      const float c = 1.f + 1e-4f * static_cast<float>((salt * 7919 + i) % 9973);
      switch (i % 4) {
        case 0: y = y * c; break;
        case 1: y = y + c; break;
        case 2: y = tanh(y); break;
        default: y = maximum(y, -c); break;
      }
    }
    const Stats before = stats();
    kiln::sync();
    const Stats after = stats();
    if (after.compiles != before.compiles + 1) {
      state.SkipWithError("trace did not compile");
      return;
    }
    state.SetIterationTime((after.compile_ms - before.compile_ms) / 1000.0);
  }
}

// ---------------------------------------------------------------- machine limits
constexpr int64_t kStream = int64_t{1} << 25;  // 128 MiB per array

void BM_StreamCopy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Buf a(kStream), c(kStream);
  parallelChunks(kStream, threads, [&](int64_t b, int64_t e) {
    std::fill(a.p + b, a.p + e, 1.f);
    std::fill(c.p + b, c.p + e, 0.f);
  });
  for (auto _ : state) {
    parallelChunks(kStream, threads, [&](int64_t b, int64_t e) {
      const float* __restrict ap = a.p;
      float* __restrict cp = c.p;
      for (int64_t i = b; i < e; ++i) cp[i] = ap[i];
    });
    benchmark::DoNotOptimize(c.p);
  }
}

void BM_StreamTriad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Buf a(kStream), b(kStream), c(kStream);
  parallelChunks(kStream, threads, [&](int64_t s, int64_t e) {
    std::fill(a.p + s, a.p + e, 0.f);
    std::fill(b.p + s, b.p + e, 1.f);
    std::fill(c.p + s, c.p + e, 2.f);
  });
  for (auto _ : state) {
    parallelChunks(kStream, threads, [&](int64_t s, int64_t e) {
      float* __restrict ap = a.p;
      const float *__restrict bp = b.p, *__restrict cp = c.p;
      for (int64_t i = s; i < e; ++i) ap[i] = bp[i] + 3.f * cp[i];
    });
    benchmark::DoNotOptimize(a.p);
  }
}

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float VecF __attribute__((vector_size(kLanes * 4)));
constexpr int kAccs = 12;
constexpr int64_t kFmaIters = 1 << 22;

/// Peak FP32 FMA throughput: independent FMA chains in vector registers.
float fmaKernel(float seed) {
  VecF acc[kAccs];
  for (int j = 0; j < kAccs; ++j) acc[j] = VecF{} + seed * static_cast<float>(j + 1);
  VecF m = VecF{} + 0.999999f, a = VecF{} + 1e-7f;
  for (int64_t i = 0; i < kFmaIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAccs; ++j) acc[j] = acc[j] * m + a;
    __asm__ volatile("" : "+x"(m));
  }
  VecF s = VecF{};
  for (int j = 0; j < kAccs; ++j) s += acc[j];
  float r = 0;
  for (int l = 0; l < kLanes; ++l) r += s[l];
  return r;
}

void BM_PeakFma(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    float sink[kThreads] = {};
    parallelChunks(threads, threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) sink[t] = fmaKernel(1.f + static_cast<float>(t));
    });
    benchmark::DoNotOptimize(sink);
  }
  state.counters["flops_per_iter"] = 2.0 * kLanes * kAccs * kFmaIters * threads;
}

// ---------------------------------------------------------------- registration
bool want(const std::string& s) { return gSystems.count(s) > 0; }

benchmark::internal::Benchmark* reg(const std::string& name, void (*fn)(benchmark::State&), bool manual = false) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond);
  return manual ? b->UseManualTime() : b->UseRealTime();
}

void registerAll() {
  const std::string k = kilnName();
  const double t = gQuick ? 0.1 : 0.4;  // minimum seconds per repetition
  if (want("machine")) {
    for (int th : {1, 2}) {
      reg("stream_copy_" + std::to_string(th) + "t/machine", BM_StreamCopy)->Arg(th)->MinTime(t);
      reg("stream_triad_" + std::to_string(th) + "t/machine", BM_StreamTriad)->Arg(th)->MinTime(t);
      reg("peak_fma_" + std::to_string(th) + "t/machine", BM_PeakFma)->Arg(th)->MinTime(t);
    }
  }
  // Workload by workload, each system's row next to its peers'.
  if (want("kiln")) reg("chain8/" + k, BM_ChainKiln)->MinTime(t);
  if (want("hand")) reg("chain8/hand-fused", BM_ChainHand)->MinTime(t);
#ifdef KILN_BENCH_HAVE_EIGEN
  if (want("eigen")) reg("chain8/eigen", BM_ChainEigen)->MinTime(t);
#endif
  if (want("kiln")) reg("fma3/" + k, BM_FmaKiln)->MinTime(t);
  if (want("hand")) reg("fma3/hand-fused", BM_FmaHand)->MinTime(t);
  if (want("kiln")) reg("softmax/" + k, BM_SoftmaxKiln)->MinTime(t);
  if (want("hand")) reg("softmax/hand-fused", BM_RowsHand<softmaxRows>)->MinTime(t);
  if (want("kiln")) reg("layernorm/" + k, BM_LayerNormKiln)->MinTime(t);
  if (want("hand")) reg("layernorm/hand-fused", BM_RowsHand<layerNormRows>)->MinTime(t);
  struct Mm {
    const char* name;
    int64_t m, n, k;
  };
  for (Mm mm : {Mm{"sgemm_1024", 1024, 1024, 1024}, Mm{"sgemm_4096x4096x1024", 4096, 4096, 1024}}) {
    const bool big = mm.m == 4096;
    const double mt = big ? (gQuick ? 0.05 : 0.5) : t;
    if (big && gQuick && gTier == "interp" && want("kiln")) {
      // The interpreter's big GEMM is slow; --quick keeps one iteration.
      reg(std::string(mm.name) + "/" + k, BM_MatmulKiln<DType::f32>)->Args({mm.m, mm.n, mm.k})->Iterations(1);
    } else if (want("kiln")) {
      reg(std::string(mm.name) + "/" + k, BM_MatmulKiln<DType::f32>)->Args({mm.m, mm.n, mm.k})->MinTime(mt);
    }
#ifdef KILN_BENCH_HAVE_OPENBLAS
    if (want("openblas")) reg(std::string(mm.name) + "/openblas", BM_MatmulOpenBlas)->Args({mm.m, mm.n, mm.k})->MinTime(mt);
#endif
#ifdef KILN_BENCH_HAVE_DNNL
    if (want("onednn")) reg(std::string(mm.name) + "/onednn", BM_MatmulDnnl)->Args({mm.m, mm.n, mm.k})->MinTime(mt);
#endif
  }
  for (Mm mm : {Mm{"gemm_bf16_1024", 1024, 1024, 1024}, Mm{"gemm_bf16_4096x4096x1024", 4096, 4096, 1024}}) {
    const double mt = mm.m == 4096 && gQuick ? 0.05 : t;
    if (want("kiln")) reg(std::string(mm.name) + "/" + k, BM_MatmulKiln<DType::bf16>)->Args({mm.m, mm.n, mm.k})->MinTime(mt);
#ifdef KILN_BENCH_HAVE_DNNL
    if (want("onednn")) reg(std::string(mm.name) + "/onednn", BM_MatmulBf16Dnnl)->Args({mm.m, mm.n, mm.k})->MinTime(mt);
#endif
  }
  if (want("kiln")) reg("mm_bias_relu/" + k, BM_MatmulBiasReluKiln)->MinTime(t);
#ifdef KILN_BENCH_HAVE_OPENBLAS
  if (want("openblas")) reg("mm_bias_relu/openblas+loop", BM_MatmulBiasReluOpenBlas)->MinTime(t);
#endif
#ifdef KILN_BENCH_HAVE_DNNL
  if (want("onednn")) {
    reg("resnet_block_fwd/onednn", BM_ResnetBlockDnnl)->MinTime(t);
    reg("resnet_block_train_step/onednn", BM_ResnetBlockTrainDnnl)->MinTime(t);
  }
#endif
  if (want("kiln")) {
    reg("mlp_train_step/" + k, BM_MlpKiln)->MinTime(t);
    reg("mlp_lr_schedule/" + k, BM_MlpScheduleKiln)->MinTime(t);
    reg("resnet_block_fwd/" + k, BM_ResnetBlockKiln)->MinTime(t);
    reg("resnet_block_train_step/" + k, BM_ResnetBlockTrainKiln)->MinTime(t);
    reg("rnn_varlen/" + k, BM_RnnVarlenKiln)->MinTime(t);
    reg("rnn_fixed40/" + k, BM_RnnFixedKiln)->MinTime(t);
    reg("dispatch_tiny_step/" + k, BM_Dispatch)->Unit(benchmark::kMicrosecond)->MinTime(t);
    reg("record_run_tiny_op/" + k, BM_RecordRunTiny)->Unit(benchmark::kMicrosecond)->MinTime(t);
    if (gTier == "interp") reg("record_op/kiln", BM_RecordOp)->Unit(benchmark::kNanosecond)->MinTime(t);
    if (gTier == "compiled") {
      for (int ops : {10, 50, 200})
        reg("compile_" + std::to_string(ops) + "_ops/" + k, BM_CompileLatency, /*manual=*/true)
            ->Arg(ops)
            ->Iterations(gQuick ? 3 : (ops == 200 ? 5 : 9));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  bool firstStepMode = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--tier=", 0) == 0) {
      gTier = a.substr(7);
    } else if (a.rfind("--systems=", 0) == 0) {
      gSystems.clear();
      std::stringstream ss(a.substr(10));
      for (std::string s; std::getline(ss, s, ',');) gSystems.insert(s);
    } else if (a == "--quick") {
      gQuick = true;
    } else if (a == "--first-step") {
      firstStepMode = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (gTier != "interp" && gTier != "compiled" && !(gTier == "replay" && firstStepMode)) {
    std::fprintf(stderr, "kiln_bench: --tier must be interp or compiled (or replay with --first-step)\n");
    return 2;
  }
  configureKiln();
  if (firstStepMode) {
    const int rc = firstStep();
    exec::Engine::instance().shutdownCompiles();
    return rc;
  }
  registerAll();
  int n = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  exec::Engine::instance().shutdownCompiles();
  return 0;
}
