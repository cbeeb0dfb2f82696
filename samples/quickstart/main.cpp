// Quickstart: record a small real computation (a two-layer network's forward
// pass and a softmax cross-entropy), run it a few times as a training loop
// would, and print what Kiln did.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  using Clock = std::chrono::steady_clock;
  reset_stats();

  const int64_t batch = 64, in = 64, hidden = 128, classes = 10;
  Tensor w1 = randn({in, hidden}, /*seed=*/1, DType::f32, 0, 0.1);
  Tensor b1 = zeros({hidden});
  Tensor w2 = randn({hidden, classes}, 2, DType::f32, 0, 0.1);
  Tensor b2 = zeros({classes});
  kiln::sync();  // parameters materialized: later traces read them as inputs

  // Five mini-batches of synthetic data, made up front (one trace).
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 5; ++i) {
    xs.push_back(randn({batch, in}, 100 + i));
    ys.push_back(cast(floor(rand({batch}, 200 + i) * static_cast<double>(classes)), DType::i64));
  }
  kiln::sync();

  double firstLoss = 0, lastLoss = 0;
  for (int step = 0; step < 5; ++step) {
    auto t0 = Clock::now();
    const Tensor& x = xs[step];
    const Tensor& labels = ys[step];
    Tensor h = relu(matmul(x, w1) + b1);
    Tensor logits = matmul(h, w2) + b2;
    Tensor loss = cross_entropy(logits, labels);
    Tensor acc = mean(cast(eq(argmax(logits, 1), labels), DType::f32));
    double l = loss.item<double>();  // flushes the trace
    double a = acc.item<double>();
    kiln::step();
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("step %d: loss %.4f  accuracy %.3f  (%.3f ms)\n", step, l, a, ms);
    if (step == 0) firstLoss = l;
    lastLoss = l;
  }

  Stats s = stats();
  std::printf("\nwhat Kiln did:\n%s", s.str().c_str());
  // Sanity: cross entropy of a near-uniform 10-way guess is about log(10).
  const bool ok = std::isfinite(firstLoss) && std::fabs(firstLoss - std::log(10.0)) < 1.0 && std::isfinite(lastLoss) &&
                  s.traces_recorded == 7 && s.distinct_trace_keys == 3 && s.ops_recorded > 0;
  std::printf("the training step was recorded %d times as one repeating trace key\n", 5);
  std::printf("quickstart: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
