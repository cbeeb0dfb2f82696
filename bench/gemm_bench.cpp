// SGEMM alone, for tuning Kiln's packed GEMM (runtime/interp/MatmulKernels.cpp)
// against OpenBLAS and oneDNN on the machine it runs on: GFLOP/s at 1 and 2
// threads, row-major C = A * B (--layout=NT: B stored transposed, as x * W^T
// reads a [N, K] weight; TN: A stored transposed, as dW = x^T * dy). The Kiln rows call the runtime's GEMM
// (runtime/interp/gemm/Sgemm.h, C = A * B as the interpreter runs it) directly,
// so the figures carry no trace or allocation cost; bench_suite.cpp measures
// the same sizes through the public API. KILN_GEMM_ISA picks the micro-kernel.
//
//   kiln_gemm_bench [--systems=kiln,openblas,onednn] [--sizes=MxNxK,...]
//                   [--layout=NN|NT|TN|TT] [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/interp/gemm/Sgemm.h"

#ifdef KILN_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_BENCH_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

namespace {

std::set<std::string> gSystems = {"kiln", "openblas", "onednn"};

struct Size {
  int64_t m, n, k;
};
std::vector<Size> gSizes = {{1024, 1024, 1024}, {4096, 4096, 1024}};
/// Whether A (B) is stored transposed: [K, M] ([N, K]) row-major.
bool gTransA = false, gTransB = false;

/// Row-major operands with values in [-1, 1), 64-byte aligned.
struct Operands {
  int64_t m, n, k;
  float *a, *b, *c;
  Operands(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
    a = alloc(m * k);
    b = alloc(k * n);
    c = alloc(m * n);
    fill(a, m * k, 6);
    fill(b, k * n, 7);
    std::memset(c, 0, sizeof(float) * m * n);
  }
  ~Operands() {
    std::free(a);
    std::free(b);
    std::free(c);
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  static float* alloc(int64_t n) { return static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64)); }
  static void fill(float* p, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = -1.f + 2.f * static_cast<float>(s >> 8) / 16777216.f;
    }
  }
};

void setFlops(benchmark::State& state, const Operands& o) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(o.m * o.n * o.k), benchmark::Counter::kIsIterationInvariantRate);
}

/// args: m, n, k, threads.
void BM_Kiln(benchmark::State& state) {
  Operands o(state.range(0), state.range(1), state.range(2));
  tbb::task_arena arena(static_cast<int>(state.range(3)));
  auto run = [&] {
    arena.execute([&] {
      const kiln::interp::gemm::StridedMatrix a = gTransA ? kiln::interp::gemm::StridedMatrix{o.a, 1, o.m}
                                                          : kiln::interp::gemm::StridedMatrix{o.a, o.k, 1};
      const kiln::interp::gemm::StridedMatrix b = gTransB ? kiln::interp::gemm::StridedMatrix{o.b, 1, o.k}
                                                          : kiln::interp::gemm::StridedMatrix{o.b, o.n, 1};
      kiln::interp::gemm::sgemm(o.m, o.n, o.k, a, b, o.c, o.n, /*accumulate=*/false, /*parallel=*/true);
    });
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(o.c);
  }
  setFlops(state, o);
  state.SetLabel(kiln::interp::gemm::isaName(kiln::interp::gemm::activeIsa()));
}

#ifdef KILN_BENCH_HAVE_OPENBLAS
void BM_OpenBlas(benchmark::State& state) {
  Operands o(state.range(0), state.range(1), state.range(2));
  openblas_set_num_threads(static_cast<int>(state.range(3)));
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, gTransA ? CblasTrans : CblasNoTrans, gTransB ? CblasTrans : CblasNoTrans, o.m, o.n,
                o.k, 1.f, o.a, gTransA ? o.m : o.k, o.b, gTransB ? o.k : o.n, 0.f, o.c, o.n);
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(o.c);
  }
  setFlops(state, o);
}
#endif

#ifdef KILN_BENCH_HAVE_DNNL
void BM_Dnnl(benchmark::State& state) {
  Operands o(state.range(0), state.range(1), state.range(2));
  omp_set_num_threads(static_cast<int>(state.range(3)));
  auto run = [&] {
    if (dnnl_sgemm(gTransA ? 'T' : 'N', gTransB ? 'T' : 'N', o.m, o.n, o.k, 1.f, o.a, gTransA ? o.m : o.k, o.b,
                   gTransB ? o.k : o.n, 0.f, o.c, o.n) != dnnl_success)
      state.SkipWithError("dnnl_sgemm failed");
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(o.c);
  }
  setFlops(state, o);
}
#endif

void registerAll() {
  for (Size s : gSizes) {
    const std::string size = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                             (gTransA || gTransB ? std::string("_") + (gTransA ? "T" : "N") + (gTransB ? "T" : "N") : "");
    for (int threads : {1, 2}) {
      auto add = [&](const char* system, void (*fn)(benchmark::State&)) {
        if (!gSystems.count(system)) return;
        const std::string name = "sgemm_" + size + "_" + std::to_string(threads) + "t/" + system;
        benchmark::RegisterBenchmark(name.c_str(), fn)
            ->Args({s.m, s.n, s.k, threads})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.5);
      };
      add("kiln", BM_Kiln);
#ifdef KILN_BENCH_HAVE_OPENBLAS
      add("openblas", BM_OpenBlas);
#endif
#ifdef KILN_BENCH_HAVE_DNNL
      add("onednn", BM_Dnnl);
#endif
    }
  }
}

bool parseSizes(const std::string& list) {
  gSizes.clear();
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    Size s{};
    if (std::sscanf(item.c_str(), "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 || s.k <= 0)
      return false;
    gSizes.push_back(s);
  }
  return !gSizes.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--systems=", 0) == 0) {
      gSystems.clear();
      std::stringstream ss(a.substr(10));
      for (std::string s; std::getline(ss, s, ',');) gSystems.insert(s);
    } else if (a.rfind("--layout=", 0) == 0) {
      const std::string layout = a.substr(9);
      if (layout.size() != 2 || layout.find_first_not_of("NT") != std::string::npos) {
        std::fprintf(stderr, "kiln_gemm_bench: --layout expects NN, NT, TN or TT (A's, then B's storage)\n");
        return 2;
      }
      gTransA = layout[0] == 'T', gTransB = layout[1] == 'T';
    } else if (a.rfind("--sizes=", 0) == 0) {
      if (!parseSizes(a.substr(8))) {
        std::fprintf(stderr, "kiln_gemm_bench: --sizes expects MxNxK[,MxNxK...] with positive extents\n");
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  registerAll();
  int n = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
