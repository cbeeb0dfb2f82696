// Transformer-block training loop (issue 20): what a new user's GPT-style
// training loop sees from tiered compilation, measured end to end.
//
//   kiln_bench_transformer [--jit=off|async|sync] [--steps=N] [--cache] [--regions-only]
//
// One process per JIT mode (the mode applies from the first step, as
// KILN_JIT would). The block: token embedding by index_select plus learned
// positions, layer_norm, causal attention through batched matmuls, softmax
// and where, a GELU MLP, a tied LM head, cross_entropy and Adam; batch 8, 64
// tokens, width 128, 4 heads, vocabulary 256. Every step records one trace
// (forward, backward, update) and reads the loss. Prints one JSON line: the
// time of every step, the median of steps 31-40 (and of the last 10 when
// more were run), the wall time of the first 40 (and of all) steps including
// every compilation, and the tiering counters. The disk kernel cache is off
// unless --cache, so every process compiles (a tier-up, not a replay).
// --regions-only keeps the whole step from being compiled, so that its hot
// regions are (every step then runs mixed: region kernels + interpreter).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"
#include "runtime/support/Settings.h"

using namespace kiln;

namespace {

constexpr int64_t kBatch = 8, kTokens = 64, kWidth = 128, kHeads = 4, kVocab = 256;
constexpr int64_t kHeadDim = kWidth / kHeads;

Tensor param(const Shape& shape, uint64_t seed, double stddev) {
  return randn(shape, seed, DType::f32, 0, stddev);
}

/// One GPT block with a tied LM head, and its Adam optimizer.
struct Block {
  Tensor wte = param({kVocab, kWidth}, 1, 0.02), wpe = param({kTokens, kWidth}, 2, 0.02);
  Tensor ln1g = ones({kWidth}), ln1b = zeros({kWidth});
  Tensor wqkv = param({kWidth, 3 * kWidth}, 3, 0.02), bqkv = zeros({3 * kWidth});
  Tensor wo = param({kWidth, kWidth}, 4, 0.02), bo = zeros({kWidth});
  Tensor ln2g = ones({kWidth}), ln2b = zeros({kWidth});
  Tensor w1 = param({kWidth, 4 * kWidth}, 5, 0.02), b1 = zeros({4 * kWidth});
  Tensor w2 = param({4 * kWidth, kWidth}, 6, 0.02), b2 = zeros({kWidth});
  Tensor lnfg = ones({kWidth}), lnfb = zeros({kWidth});
  Tensor causal;  // [T, T] bool, true on and below the diagonal
  std::unique_ptr<optim::Adam> opt;
  uint32_t seed = 12345;

  Block() {
    std::vector<bool> mask(static_cast<size_t>(kTokens * kTokens));
    for (int64_t i = 0; i < kTokens; ++i)
      for (int64_t j = 0; j < kTokens; ++j) mask[static_cast<size_t>(i * kTokens + j)] = j <= i;
    causal = from_vector(mask, {kTokens, kTokens});
    kiln::sync();
    opt = std::make_unique<optim::Adam>(
        std::vector<Tensor*>{&wte, &wpe, &ln1g, &ln1b, &wqkv, &bqkv, &wo, &bo, &ln2g, &ln2b, &w1, &b1, &w2, &b2,
                             &lnfg, &lnfb},
        optim::AdamOptions{.lr = 3e-4});
  }

  /// A fresh batch of T + 1 tokens per row from the host, as a data loader
  /// would hand it in: inputs and their next-token targets.
  Tensor tokens() {
    std::vector<int64_t> t(static_cast<size_t>(kBatch * (kTokens + 1)));
    for (int64_t& x : t) {
      seed = seed * 1664525u + 1013904223u;
      x = static_cast<int64_t>((seed >> 8) % kVocab);
    }
    return from_vector(t, {kBatch, kTokens + 1});
  }

  /// One training step; returns the loss (flushed by the caller's read).
  Tensor step() {
    Tensor all = tokens();
    Tensor input = slice(all, 1, 0, kTokens), target = slice(all, 1, 1, kTokens + 1);
    const int64_t t = kTokens;
    Tensor x = index_select(wte, 0, input) + wpe;  // [B, T, C]
    Tensor h = layer_norm(x, ln1g, ln1b);
    Tensor qkv = matmul(h, wqkv) + bqkv;
    auto split = [&](int i) {
      return permute(reshape(slice(qkv, 2, i * kWidth, (i + 1) * kWidth), {kBatch, t, kHeads, kHeadDim}),
                     {0, 2, 1, 3});
    };
    Tensor q = split(0), k = split(1), v = split(2);
    Tensor att = matmul(q, transpose(k)) * (1.0 / std::sqrt(static_cast<double>(kHeadDim)));
    att = softmax(where(causal, att, -1e9), -1);
    Tensor y = reshape(permute(matmul(att, v), {0, 2, 1, 3}), {kBatch, t, kWidth});
    x = x + (matmul(y, wo) + bo);
    Tensor m = gelu(matmul(layer_norm(x, ln2g, ln2b), w1) + b1);
    x = x + (matmul(m, w2) + b2);
    Tensor logits = matmul(layer_norm(x, lnfg, lnfb), transpose(wte));  // tied head
    Tensor loss = cross_entropy(reshape(logits, {kBatch * t, kVocab}), reshape(target, {kBatch * t}));
    loss.backward();
    opt->step();
    return loss;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double sum(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < std::min(n, v.size()); ++i) s += v[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string jit = "async";
  int steps = 40;
  bool cache = false, regionsOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--jit=", 0) == 0) {
      jit = a.substr(6);
    } else if (a.rfind("--steps=", 0) == 0) {
      steps = std::max(1, std::atoi(a.c_str() + 8));
    } else if (a == "--cache") {
      cache = true;
    } else if (a == "--regions-only") {
      regionsOnly = true;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench_transformer [--jit=off|async|sync] [--steps=N] [--cache] [--regions-only]\n");
      return 2;
    }
  }
  Settings s = settings();
  if (std::string error = exec::applySetting(*exec::findSetting("jit"), jit, exec::SettingSource::Option, s);
      !error.empty()) {
    std::fprintf(stderr, "kiln_bench_transformer: %s\n", error.c_str());
    return 2;
  }
  if (!cache) s.cache = "off";
  set_settings(s);
  if (regionsOnly) exec::Engine::instance().setTraceCompilesForTesting(false);

  Block block;
  reset_stats();
  std::vector<double> stepMs;
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor l = block.step();
    kiln::step();
    loss = l.item<float>();
    stepMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const Stats st = stats();
  exec::Engine::instance().shutdownCompiles();

  const size_t n = stepMs.size();
  auto lastTen = [&](size_t end) {
    end = std::min(end, n);
    return median(std::vector<double>(stepMs.begin() + static_cast<long>(end - std::min<size_t>(end, 10)),
                                      stepMs.begin() + static_cast<long>(end)));
  };
  std::printf("{\"jit\": \"%s\", \"steps\": %zu, \"step_ms_31_40\": %.4f, \"step_ms_last10\": %.4f, "
              "\"wall_40_s\": %.4f, \"wall_s\": %.4f, \"loss\": %.7g, \"ops_per_step\": %llu, "
              "\"compiles\": %llu, \"compile_ms\": %.1f, \"compile_import_ms\": %.1f, \"compile_lower_ms\": %.1f, "
              "\"compile_llvm_ms\": %.1f, \"compile_jit_ms\": %.1f, \"compiled_runs\": %llu, "
              "\"interpreted_runs\": %llu, \"mixed_runs\": %llu, \"region_compiles\": %llu, "
              "\"region_compile_ms\": %.1f, \"region_launches\": %llu, \"kernel_launches\": %llu, \"step_ms\": [",
              jit.c_str(), n, lastTen(40), lastTen(n), sum(stepMs, 40) / 1000, sum(stepMs, n) / 1000, loss,
              static_cast<unsigned long long>(st.ops_recorded / std::max<uint64_t>(st.traces_recorded, 1)),
              static_cast<unsigned long long>(st.compiles), st.compile_ms, st.compile_import_ms,
              st.compile_lower_ms, st.compile_llvm_ms, st.compile_jit_ms,
              static_cast<unsigned long long>(st.compiled_runs), static_cast<unsigned long long>(st.interpreted_runs),
              static_cast<unsigned long long>(st.mixed_runs), static_cast<unsigned long long>(st.region_compiles),
              st.region_compile_ms, static_cast<unsigned long long>(st.region_launches),
              static_cast<unsigned long long>(st.kernel_launches));
  for (size_t i = 0; i < n; ++i) std::printf("%s%.3f", i ? ", " : "", stepMs[i]);
  std::printf("]}\n");
  return std::isfinite(loss) ? 0 : 1;
}
