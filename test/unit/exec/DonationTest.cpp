// Buffer donation: a compiled optimizer step updates its parameters in the
// buffers they already have, when nothing else can see the old values, and
// never when something can. Needs libkiln_jit (KILN_BUILD_COMPILER).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "kiln/kiln.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

struct Mlp {
  Tensor w1 = rand({16, 32}, 11, DType::f32, -0.3, 0.3);
  Tensor b1 = zeros({32});
  Tensor w2 = rand({32, 8}, 12, DType::f32, -0.3, 0.3);
  Tensor b2 = zeros({8});
  std::vector<Tensor*> params() { return {&w1, &b1, &w2, &b2}; }
};

/// One training step (forward, backward, Adam) as one trace; returns the loss.
float trainStep(Mlp& m, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  Tensor h = relu(matmul(x, m.w1) + m.b1);
  Tensor loss = cross_entropy(matmul(h, m.w2) + m.b2, y);
  loss.backward();
  opt.step();
  opt.zero_grad();
  kiln::step();
  return loss.item<float>();
}

struct Batch {
  Tensor x = rand({24, 16}, 5, DType::f32, -1, 1);
  Tensor y = cast(floor(rand({24}, 6, DType::f32, 0, 8)), DType::i64);
  Batch() { kiln::sync(); }
};

std::vector<std::vector<float>> valuesOf(Mlp& m) {
  std::vector<std::vector<float>> out;
  for (Tensor* p : m.params()) out.push_back(p->to_vector<float>());
  return out;
}

TEST(Donation, CompiledAdamStepUpdatesParametersInPlace) {
  Batch batch;
  constexpr int kSteps = 12;
  // Reference: the same training, interpreted.
  std::vector<float> refLoss;
  std::vector<std::vector<float>> refParams;
  {
    JitScope off(JitMode::Off);
    Mlp m;
    optim::Adam opt(m.params(), {.lr = 0.01});
    for (int i = 0; i < kSteps; ++i) refLoss.push_back(trainStep(m, opt, batch.x, batch.y));
    refParams = valuesOf(m);
  }
  JitScope sync(JitMode::Sync, 2);
  Mlp m;
  optim::Adam opt(m.params(), {.lr = 0.01});
  reset_stats();
  std::vector<const void*> buffers;
  for (int i = 0; i < kSteps; ++i) {
    const float loss = trainStep(m, opt, batch.x, batch.y);
    EXPECT_NEAR(loss, refLoss[static_cast<size_t>(i)], 1e-4f * (1 + std::fabs(refLoss[static_cast<size_t>(i)])))
        << "step " << i;
    // Step 0 records Adam's first update (a different trace); from step 2 on
    // every step runs the compiled kernel, which must keep each parameter in
    // the buffer it had after the first compiled step.
    std::vector<const void*> now;
    for (Tensor* p : m.params()) now.push_back(p->data());
    if (i >= 2) {
      if (buffers.empty()) buffers = now;
      EXPECT_EQ(now, buffers) << "step " << i << ": a parameter moved to a new buffer";
    }
  }
  Stats s = stats();
  EXPECT_GE(s.compiled_runs, static_cast<uint64_t>(kSteps - 2)) << s.str();
  // Four parameters plus Adam's m and v for each and its two step powers.
  EXPECT_GE(s.donated_buffers, 4u * static_cast<uint64_t>(kSteps - 3)) << s.str();
  std::vector<std::vector<float>> params = valuesOf(m);
  ASSERT_EQ(params.size(), refParams.size());
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < params[p].size(); ++i)
      ASSERT_NEAR(params[p][i], refParams[p][i], 1e-4f * (1 + std::fabs(refParams[p][i]))) << "param " << p << " [" << i << "]";
}

TEST(Donation, AValueStillHeldIsNeverOverwritten) {
  JitScope sync(JitMode::Sync, 2);
  Tensor w = rand({64, 64}, 7, DType::f32, -1, 1);
  kiln::sync();
  reset_stats();
  std::vector<Tensor> history;  // every old value stays readable
  for (int i = 0; i < 6; ++i) {
    history.push_back(w);
    w = w * 0.5f + 1.0f;
    kiln::step();
  }
  std::vector<float> expect = rand({64, 64}, 7, DType::f32, -1, 1).to_vector<float>();
  for (size_t k = 0; k < history.size(); ++k) {
    std::vector<float> got = history[k].to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], expect[i]) << "value " << k << " [" << i << "]";
    for (float& e : expect) e = e * 0.5f + 1.0f;
  }
  EXPECT_EQ(stats().donated_buffers, 0u);
}

TEST(Donation, CallerOwnedMemoryIsNeverWritten) {
  JitScope sync(JitMode::Sync, 2);
  std::vector<float> host(256);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  const std::vector<float> original = host;
  reset_stats();
  Tensor w = from_blob(host.data(), {16, 16}, DType::f32, Device{}, [](void*) {});
  for (int i = 0; i < 5; ++i) {
    w = w * 2.0f - 1.0f;
    kiln::step();
  }
  EXPECT_EQ(host, original);
  std::vector<float> got = w.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    float e = original[i];
    for (int k = 0; k < 5; ++k) e = e * 2.0f - 1.0f;
    ASSERT_FLOAT_EQ(got[i], e) << i;
  }
}

TEST(Donation, UpdatesThatReadOtherElementsAreNotDonatedUnsafely) {
  // w' = w^T + w * sum(w): element (i, j) of the update reads w(j, i), so
  // it cannot be computed in w's buffer; the results must still match.
  Tensor w0 = rand({32, 32}, 9, DType::f32, -1, 1);
  std::vector<float> expect;
  {
    JitScope off(JitMode::Off);
    Tensor w = w0;
    for (int i = 0; i < 5; ++i) {
      w = permute(w, {1, 0}) + w * (sum(w) * 0.001f);
      kiln::step();
    }
    expect = w.to_vector<float>();
  }
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  Tensor w = w0 * 1.0f;
  kiln::step();
  for (int i = 0; i < 5; ++i) {
    w = permute(w, {1, 0}) + w * (sum(w) * 0.001f);
    kiln::step();
  }
  EXPECT_GT(stats().compiled_runs, 0u);
  std::vector<float> got = w.to_vector<float>();
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expect[i], 1e-5f * (1 + std::fabs(expect[i]))) << i;
}

TEST(Donation, ElementwiseUpdateReusesTheBuffer) {
  JitScope sync(JitMode::Sync, 2);
  Tensor w = rand({128, 128}, 3, DType::f32, -1, 1) * 1.0f;
  kiln::sync();
  std::vector<float> expect = w.to_vector<float>();
  reset_stats();
  const void* buffer = nullptr;
  for (int i = 0; i < 6; ++i) {
    w = w * 0.5f + 1.0f;
    kiln::step();
    for (float& e : expect) e = e * 0.5f + 1.0f;
    if (i == 2) buffer = w.data();
    if (i > 2) EXPECT_EQ(w.data(), buffer) << "step " << i;
  }
  EXPECT_GE(stats().donated_buffers, 3u) << stats().str();
  std::vector<float> got = w.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], expect[i]) << i;
}

}  // namespace
}  // namespace kiln
