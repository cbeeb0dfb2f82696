// kiln_gpu_bench: Kiln on cuda:0, the GPU check's timings (scripts/gpu-check.sh).
//
// The workloads of bench/gpu_peers.py (PyTorch eager on the same GPU), same
// shapes and data ranges. Each figure is the median over repetitions of the
// mean wall time per call over a batch of calls: each call records its ops
// and flushes them (kiln::step, no wait), and the batch ends with one
// kiln::sync, as PyTorch's batch ends with one synchronize. Writes one JSON
// object: {"system", "jit", "rows": {name: {"median_s", "samples_s",
// "compiled_share"}}}.
//
//   kiln_gpu_bench --jit=off|replay|sync --out=FILE [--reps=N] [--min-time=S]
//                  [--only=a,b] [--fill] [--check]
//
// --jit=off times tier 0 (one tier-0 kernel or cuBLASLt call per op);
// --jit=replay times the compiled kernels of KILN_CACHE_DIR (tier 1, no
// compiler); --fill runs each workload a few times with --jit=sync to put its
// compiled kernels into the cache (how scripts/gpu-check.sh packs them).
// --check compares each workload's last result with the same workload
// interpreted on the CPU (its error over the result's largest magnitude,
// "check_error" in the JSON) and fails when one is beyond its tolerance:
// the compiled kernels' only check on the GPU beyond the demo.
// Links only libkiln: the GPU machine has no LLVM or MLIR.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/backends/Hal.h"
#include "runtime/interp/OpLibrary.h"

using namespace kiln;

namespace {

constexpr int64_t kBig = int64_t{1} << 24;
constexpr int64_t kRows = 4096, kCols = 1024;
constexpr int64_t kBigRows = 32768, kBigCols = 4096;  // issue 15's second softmax/layer_norm shape
constexpr int64_t kBatchRows = 4096, kBatchCols = 512;
constexpr int64_t kVocab = 50257, kWidth = 768, kTokens = 8 * 1024;  // embedding_grad: GPT-2's table
const std::vector<int64_t> kBatches = {1000, 1531, 2048, 4096, 2900};  // dynamic_batches' sizes

Tensor uniform(const Shape& shape, uint64_t seed, double lo, double hi, DType t = DType::f32) {
  // Drawn on the CPU and copied, so that --check's references see the same bits.
  Tensor x = rand(shape, seed, DType::f32, lo, hi, Device::cpu());
  if (t != DType::f32) x = cast(x, t);
  x = x.to(default_device());
  kiln::sync();
  return x;
}

/// MLP 784-512-512-10, batch 256, Adam: bench/bench_suite.cpp's training step.
struct Mlp {
  Tensor w1 = randn({784, 512}, 11, DType::f32, 0, std::sqrt(2.0 / 784)), b1 = zeros({512});
  Tensor w2 = randn({512, 512}, 12, DType::f32, 0, std::sqrt(2.0 / 512)), b2 = zeros({512});
  Tensor w3 = randn({512, 10}, 13, DType::f32, 0, std::sqrt(2.0 / 512)), b3 = zeros({10});
  Tensor x = randn({256, 784}, 14);
  Tensor y = cast(floor(rand({256}, 15) * 10.0), DType::i64);
  std::unique_ptr<optim::Adam> opt;
  Tensor loss;
  Mlp() {
    kiln::sync();
    opt = std::make_unique<optim::Adam>(std::vector<Tensor*>{&w1, &b1, &w2, &b2, &w3, &b3},
                                        optim::AdamOptions{.lr = 1e-3});
  }
  void step() {
    Tensor h = relu(matmul(x, w1) + b1);
    h = relu(matmul(h, w2) + b2);
    loss = cross_entropy(matmul(h, w3) + b3, y);
    loss.backward();
    opt->step();
  }
};

struct Workload {
  std::string name;
  std::function<void()> call;  // records one call's ops (no flush)
  bool skipFill = false;       // --fill skips it: the fake driver would compute it on the host, slowly
  double tolerance = 1e-4;     // --check: the largest error over the result's largest magnitude; 0: not checked
  int64_t maxShapes = 0;       // KILN_MAX_SHAPES while it runs (0: as set)
};

/// The workloads on the default device; each call leaves its result in
/// `*out` (but the MLP step's).
std::vector<Workload> workloads(const std::shared_ptr<Tensor>& out) {
  auto x = std::make_shared<Tensor>(uniform({kBig}, 1, -2, 2));
  auto a = std::make_shared<Tensor>(uniform({kBig}, 2, -1, 1)), b = std::make_shared<Tensor>(uniform({kBig}, 3, -1, 1)),
       c = std::make_shared<Tensor>(uniform({kBig}, 4, -1, 1));
  auto rows = std::make_shared<Tensor>(uniform({kRows, kCols}, 5, -2, 2));
  auto bigRows = std::make_shared<Tensor>(uniform({kBigRows, kBigCols}, 16, -2, 2));
  auto a1024 = std::make_shared<Tensor>(uniform({1024, 1024}, 6, -1, 1)),
       b1024 = std::make_shared<Tensor>(uniform({1024, 1024}, 7, -1, 1)),
       bias = std::make_shared<Tensor>(uniform({1024}, 8, -1, 1));
  auto a4096 = std::make_shared<Tensor>(uniform({4096, 1024}, 9, -1, 1)),
       b4096 = std::make_shared<Tensor>(uniform({1024, 4096}, 10, -1, 1));
  auto h1024a = std::make_shared<Tensor>(cast(*a1024, DType::bf16)),
       h1024b = std::make_shared<Tensor>(cast(*b1024, DType::bf16)),
       h4096a = std::make_shared<Tensor>(cast(*a4096, DType::bf16)),
       h4096b = std::make_shared<Tensor>(cast(*b4096, DType::bf16));
  auto tiny = std::make_shared<Tensor>(uniform({4, 8}, 17, -1, 1));
  auto batchRows = std::make_shared<Tensor>(uniform({kBatchRows, kBatchCols}, 18, -2, 2)),
       batchBias = std::make_shared<Tensor>(uniform({kBatchCols}, 19, -1, 1));
  auto mlp = std::make_shared<Mlp>();
  auto table = std::make_shared<Tensor>(uniform({kVocab, kWidth}, 20, -1, 1));
  auto tokens = std::make_shared<Tensor>(
      cast(floor(rand({8, kTokens / 8}, 21, DType::f32, 0, kVocab - 1, Device::cpu())), DType::i64).to(default_device()));
  auto tokenGrads = std::make_shared<Tensor>(uniform({8, kTokens / 8, kWidth}, 22, -1, 1));
  kiln::sync();
  return {
      {"fma", [=] { *out = *a * *b + *c; }},
      {"chain8", [=] { *out = tanh((*x * 1.5f + 0.5f) * sigmoid(*x)) + *x * *x; }},
      {"softmax", [=] { *out = softmax(*rows, -1); }},
      {"layernorm", [=] { *out = layer_norm(*rows); }},
      {"softmax_32768x4096", [=] { *out = softmax(*bigRows, -1); }},
      {"layernorm_32768x4096", [=] { *out = layer_norm(*bigRows); }},
      {"sgemm_1024", [=] { *out = matmul(*a1024, *b1024); }, true},
      {"sgemm_4096x4096x1024", [=] { *out = matmul(*a4096, *b4096); }, true},
      {"gemm_bf16_1024", [=] { *out = matmul(*h1024a, *h1024b); }, true, 2e-2},  // bf16 results
      {"gemm_bf16_4096x4096x1024", [=] { *out = matmul(*h4096a, *h4096b); }, true, 2e-2},
      {"mm_bias_relu", [=] { *out = relu(matmul(*a1024, *b1024) + *bias); }},
      {"mlp_train_step", [=] { mlp->step(); }, false, 0},
      // An embedding's gradient (index_select's: index_add of the tokens'
      // rows, a thread per element of each distinct row on tier 0), at
      // GPT-2's vocabulary and width for 8 x 1024 tokens; as a product with
      // a one-hot matrix it would take 1.6 GB and 630 GFLOP.
      {"embedding_grad",
       [=] {
         Tensor t = *table;
         t.requires_grad();
         *out = grad(sum(mul(index_select(t, 0, *tokens), *tokenGrads)), {t})[0];
       }},
      // Launch cost: a compiled step of several kernels on 32 floats, all
      // host time (KILN_CUDA_GRAPHS: one graph launch, or one call a kernel).
      {"launch_tiny_step", [=] { *out = softmax(*tiny, -1) * layer_norm(*tiny) + exp(*tiny).sum(); }},
      // One step at each of kBatches' sizes (a trace each): past
      // KILN_MAX_SHAPES (2 here) one dynamic-shape kernel serves them; the
      // result checked is the last size's. (A row reduction would make it
      // regions around tier 0's warp kernels on CUDA: no dynamic kernel.)
      {"dynamic_batches",
       [=] {
         for (size_t k = 0; k < kBatches.size(); ++k) {
           const Tensor xb = slice(*batchRows, 0, 0, kBatches[k]);
           const Tensor h = tanh(xb * 1.5f + *batchBias) * xb;
           *out = sum(h, {0});  // over the batch: no library reduction, so the trace compiles whole
           if (k + 1 < kBatches.size()) kiln::step();
         }
       },
       false, 1e-4, 2},
  };
}

/// KILN_MAX_SHAPES set to `n` for a scope (n > 0; 0: left as it is).
class ScopedMaxShapes {
 public:
  explicit ScopedMaxShapes(int64_t n) : saved_(settings().max_shapes), set_(n > 0) {
    if (set_) apply(n);
  }
  ~ScopedMaxShapes() {
    if (set_) apply(saved_);
  }

 private:
  static void apply(int64_t n) {
    Settings s = settings();
    s.max_shapes = n;
    set_settings(s);
  }
  int64_t saved_;
  bool set_;
};

/// An error no tolerance admits that JSON can still carry (no inf or nan).
constexpr double kWrong = 1e300;

/// max |got - want| over max |want| (1 where want is all zero), on the host;
/// kWrong for another size or a NaN or infinity where the other has none.
double relativeError(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = cast(got, DType::f32).to(Device::cpu()).to_vector<float>();
  const std::vector<float> w = cast(want, DType::f32).to(Device::cpu()).to_vector<float>();
  if (g.size() != w.size()) return kWrong;
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    if (!std::isfinite(g[i]) || !std::isfinite(w[i])) return kWrong;
    err = std::max(err, std::fabs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
  }
  return std::min(kWrong, err / (scale > 0 ? scale : 1.0));
}

std::string arg(int argc, char** argv, const std::string& key, const std::string& fallback) {
  const std::string prefix = "--" + key + "=";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind(prefix, 0) == 0) return argv[i] + prefix.size();
  return fallback;
}

bool flag(int argc, char** argv, const std::string& key) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == "--" + key) return true;
  return false;
}

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string jit = arg(argc, argv, "jit", "off"), outPath = arg(argc, argv, "out", "");
  const int reps = std::stoi(arg(argc, argv, "reps", "5"));
  const double minTime = std::stod(arg(argc, argv, "min-time", "0.2"));
  const std::string only = "," + arg(argc, argv, "only", "") + ",";
  const bool fill = flag(argc, argv, "fill"), check = flag(argc, argv, "check");
  // The inputs are made interpreted (under --jit=replay the traces that draw
  // them on the CPU would want kernels compiled for this CPU); --check's
  // references are the same workloads, interpreted on the CPU.
  Settings s = settings();
  s.jit = JitMode::Off;
  set_settings(s);
  auto cpuOut = std::make_shared<Tensor>();
  std::vector<Workload> references;
  if (check) {
    set_default_device(Device::cpu());
    references = workloads(cpuOut);
  }
  set_default_device(Device::cuda(0));
  auto out = std::make_shared<Tensor>();
  const std::vector<Workload> all = workloads(out);
  s.jit = jit == "replay" ? JitMode::Replay : jit == "sync" ? JitMode::Sync : JitMode::Off;
  s.jit_threshold = 1;
  set_settings(s);

  std::ostringstream rowsJson;
  bool first = true, checksPassed = true;
  for (size_t wi = 0; wi < all.size(); ++wi) {
    const Workload& w = all[wi];
    if (only != ",," && only.find("," + w.name + ",") == std::string::npos) continue;
    if (fill && w.skipFill) continue;
    const ScopedMaxShapes shapes(w.maxShapes);
    auto once = [&] {
      w.call();
      kiln::step();
    };
    for (int i = 0; i < (fill ? 3 : 5); ++i) once();
    kiln::sync();
    if (fill) {
      std::printf("kiln %s: filled (%llu compiles)\n", w.name.c_str(), static_cast<unsigned long long>(stats().compiles));
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    once();
    kiln::sync();
    const int iters = std::clamp(static_cast<int>(minTime / std::max(seconds(t0), 1e-7)), 1, 10000);
    const Stats before = stats();
    std::vector<double> samples;
    for (int r = 0; r < reps; ++r) {
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) once();
      kiln::sync();
      samples.push_back(seconds(t0) / iters);
    }
    const Stats after = stats();
    const double ran = static_cast<double>((after.compiled_ops - before.compiled_ops) +
                                           (after.interpreted_ops - before.interpreted_ops));
    const double compiledShare = ran > 0 ? static_cast<double>(after.compiled_ops - before.compiled_ops) / ran : 0;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("kiln(%s) %s: %.1f us (compiled share %.2f)\n", jit.c_str(), w.name.c_str(), median * 1e6,
                compiledShare);
    double checkError = -1;
    if (check && w.tolerance > 0) {
      Settings off = settings();
      const JitMode mode = off.jit;
      off.jit = JitMode::Off;  // the reference is interpreted (replay would want its kernels cached)
      set_settings(off);
      references[wi].call();
      kiln::sync();
      off.jit = mode;
      set_settings(off);
      checkError = relativeError(*out, *cpuOut);
      const bool ok = checkError <= w.tolerance;
      checksPassed = checksPassed && ok;
      std::printf("check %s: error %.3g of the largest magnitude against the CPU (tolerance %.0e): %s\n",
                  w.name.c_str(), checkError, w.tolerance, ok ? "ok" : "FAIL");
    }
    std::fflush(stdout);
    rowsJson << (first ? "" : ",\n") << "  \"" << w.name << "\": {\"median_s\": " << median
             << ", \"compiled_share\": " << compiledShare << ", \"check_error\": " << checkError
             << ", \"samples_s\": [";
    for (size_t i = 0; i < samples.size(); ++i) rowsJson << (i ? ", " : "") << samples[i];
    rowsJson << "]}";
    first = false;
  }
  // Whether cuBLASLt's relu epilogue keeps NaN (Kiln's probe, CublasLtMatmul.h):
  // mm_bias_relu at tier 0 is then one call, else a call and a relu kernel.
  const bool reluEpilogue = hal::deviceContext(Device::cuda(0)).ops().fusesMatmulEpilogue(DType::f32, true);
  std::printf("cuBLASLt's relu epilogue %s\n", reluEpilogue ? "keeps NaN: fused" : "does not keep NaN: not fused");
  if (!outPath.empty()) {
    std::ofstream f(outPath);
    f << "{\"system\": \"kiln\", \"jit\": \"" << jit << "\", \"cublaslt_relu_epilogue\": "
      << (reluEpilogue ? "true" : "false") << ", \"rows\": {\n" << rowsJson.str() << "\n}}\n";
  }
  return checksPassed ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "kiln_gpu_bench: %s\n", e.what());
  return 1;
}
