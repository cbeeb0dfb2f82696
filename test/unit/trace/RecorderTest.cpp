// Recorder semantics: lazy recording, flush rules, dead-value elimination,
// thread hand-off.
#include "runtime/trace/Recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"

namespace kiln {
namespace {

trace::Recorder& rec() { return trace::Recorder::current(); }

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override { sync(); }
};

TEST_F(RecorderTest, OpsRecordWithoutRunning) {
  reset_stats();
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = a * 2.0f + 1.0f;
  EXPECT_FALSE(b.is_materialized());
  EXPECT_TRUE(a.is_materialized());
  EXPECT_GT(rec().pendingNodes(), 0u);
  EXPECT_EQ(stats().interpreted_runs, 0u);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_TRUE(b.is_materialized());
  EXPECT_EQ(rec().pendingNodes(), 0u);
  EXPECT_EQ(stats().interpreted_runs, 1u);
}

TEST_F(RecorderTest, EveryReadFlushes) {
  Tensor a = from_vector<float>({1, 2}, {2});
  Tensor b = a + 1.0f;
  EXPECT_FALSE(b.is_materialized());
  b.data();
  EXPECT_TRUE(b.is_materialized());
  Tensor c = b * b;
  sync();
  EXPECT_TRUE(c.is_materialized());
  Tensor d = c - 1.0f;
  step();
  EXPECT_TRUE(d.is_materialized());
  Tensor e = sum(d);
  EXPECT_FLOAT_EQ(e.item<float>(), 3.0f + 8.0f);
}

TEST_F(RecorderTest, DeadValuesAreNeverComputed) {
  reset_stats();
  Tensor a = from_vector<float>({1, 2, 3, 4}, {4});
  Tensor live;
  {
    Tensor dead1 = exp(a);
    Tensor dead2 = dead1 * 3.0f;
    live = a + 1.0f;
  }  // dead1/dead2 released before the flush
  sync();
  Stats s = stats();
  EXPECT_EQ(s.ops_eliminated, 3u);  // exp, the constant 3, mul
  EXPECT_EQ(live.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
}

TEST_F(RecorderTest, SizeLimitFlushes) {
  reset_stats();
  const int64_t limit = settings().max_trace_ops;
  Tensor x = from_vector<float>({0}, {1});
  for (int64_t i = 0; i < limit + 10; ++i) x = x + 1.0f;  // one add each (and the constant once)
  EXPECT_GE(stats().flushes_size_limit, 1u);
  EXPECT_FLOAT_EQ(x.item<float>(), static_cast<float>(limit + 10));
}

TEST_F(RecorderTest, TensorFromAnotherThreadFlushesItsOwnerFirst) {
  reset_stats();
  Tensor produced;
  std::atomic<bool> ready{false}, done{false};
  std::thread producer([&] {
    Tensor a = from_vector<float>({1, 2, 3}, {3});
    produced = a * 10.0f;  // pending in the producer's trace
    ready = true;
    while (!done) std::this_thread::yield();
  });
  while (!ready) std::this_thread::yield();
  EXPECT_FALSE(produced.is_materialized());
  Tensor mine = produced + 1.0f;  // flushes the producer's trace
  EXPECT_TRUE(produced.is_materialized());
  EXPECT_EQ(mine.to_vector<float>(), (std::vector<float>{11, 21, 31}));
  EXPECT_GE(stats().flushes_cross_thread, 1u);
  done = true;
  producer.join();
}

TEST_F(RecorderTest, ThreadExitFlushesPendingWork) {
  Tensor result;
  std::thread([&] {
    Tensor a = from_vector<int32_t>({1, 2}, {2});
    result = a * 3;
  }).join();
  EXPECT_TRUE(result.is_materialized());
  EXPECT_EQ(result.to_vector<int32_t>(), (std::vector<int32_t>{3, 6}));
}

TEST_F(RecorderTest, ManyThreadsRecordIndependently) {
  std::vector<std::thread> threads;
  std::vector<double> sums(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &sums] {
      Tensor x = arange(0, 1000, 1, DType::f64);
      double total = 0;
      for (int it = 0; it < 20; ++it) {
        Tensor y = x * static_cast<double>(t) + static_cast<double>(it);
        total += sum(y).item<double>();
        step();
      }
      sums[t] = total;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    double expected = 0;
    for (int it = 0; it < 20; ++it) expected += t * 499500.0 + it * 1000.0;
    EXPECT_DOUBLE_EQ(sums[t], expected) << t;
  }
}

TEST_F(RecorderTest, ViewsShareStorage) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = transpose(a);
  sync();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor s = slice(a, 1, 0, 3, 2);
  sync();
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{3, 2}));
  // data() always gives a dense buffer; a strided view stays one.
  const float* d = static_cast<const float*>(t.data());
  EXPECT_EQ(d[1], 4.0f);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{1, 3}));
}

/// Number of pending Full nodes (the listing names them "full").
size_t pendingFulls() {
  std::string listing = rec().traceListing();
  size_t n = 0;
  for (size_t at = listing.find("full"); at != std::string::npos; at = listing.find("full", at + 1)) ++n;
  return n;
}

TEST_F(RecorderTest, EqualScalarOperandsShareOneConstant) {
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor y = x;
  for (int i = 0; i < 64; ++i) y = y * 2.0f;
  EXPECT_EQ(pendingFulls(), 1u) << rec().traceListing();
  EXPECT_EQ(rec().pendingNodes(), 1u + 1u + 64u);  // the parameter, 2, the products
  // Other values, dtypes and signs of zero are other constants; equal
  // values later in the trace, after them, still find the first.
  Tensor z = y + 0.0f;
  z = z - (-0.0f);
  z = z * 2.0;  // f32 result; the operand is an f64 scalar cast to the tensor's type: still 2
  z = z + 2;
  Tensor i = from_vector<int32_t>({3}, {1}) * 2;
  EXPECT_EQ(pendingFulls(), 4u) << rec().traceListing();  // f32 2, 0 and -0; i32 2
  std::vector<float> want{1, 2};
  for (float& v : want) {
    for (int k = 0; k < 64; ++k) v *= 2.0f;
    v = (v + 0.0f - (-0.0f)) * 2.0f + 2.0f;
  }
  EXPECT_EQ(z.to_vector<float>(), want);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{6}));
  // A new trace starts without them.
  Tensor w = x * 2.0f;
  EXPECT_EQ(pendingFulls(), 1u);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST_F(RecorderTest, ManyDistinctConstantsAllComputeRight) {
  // Past the table's capacity the rest are recorded one per use; the first
  // ones are still shared.
  Tensor x = from_vector<float>({0}, {1});
  float want = 0;
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 300; ++k) {
      x = x + static_cast<float>(k);
      want += static_cast<float>(k);
    }
  }
  EXPECT_EQ(pendingFulls(), 300u + (300u - 128u)) << "the first 128 values shared in the second round";
  EXPECT_EQ(x.item<float>(), want);
}

TEST_F(RecorderTest, SharedConstantsKeepTheirGradientsApart) {
  // mul's VJP keeps its constant operand: both products read one node, and
  // each gradient is right.
  Tensor a = from_vector<float>({1, 2}, {2}).requires_grad();
  Tensor b = from_vector<float>({3, 4}, {2}).requires_grad();
  Tensor loss = sum(a * 3.0f + b * 3.0f * 3.0f);
  EXPECT_EQ(pendingFulls(), 1u) << rec().traceListing();
  loss.backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{9, 9}));
}

TEST_F(RecorderTest, ConstantsDroppedOnAnotherThreadAreNotReused) {
  // The only handle on a shared constant (kept by the mul's autograd node)
  // goes away on another thread while this one records the same value: it
  // must get a live handle, never the one being deleted (a sanitizer build
  // sees a use after free otherwise), and every result stays right.
  Tensor w = from_vector<float>({1, 2}, {2}).requires_grad();
  std::vector<Tensor> handoff;
  std::mutex m;
  std::atomic<bool> done{false};
  std::thread dropper([&] {
    while (!done.load()) {
      std::vector<Tensor> drop;
      {
        std::lock_guard<std::mutex> lock(m);
        drop.swap(handoff);
      }
    }
  });
  std::vector<Tensor> kept;
  for (int i = 0; i < 2000; ++i) {
    Tensor y = w * 2.0f;
    {
      std::lock_guard<std::mutex> lock(m);
      handoff.push_back(std::move(y));
    }
    kept.push_back(w * 2.0f + 1.0f);
    if (i % 100 == 99) sync();
  }
  done = true;
  dropper.join();
  for (const Tensor& k : kept) EXPECT_EQ(k.to_vector<float>(), (std::vector<float>{3, 5}));
}

TEST_F(RecorderTest, ScalarExponentsAreNotShared) {
  // Kernels specialise on pow's exponent, and regions keep it with its pow.
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor y = pow(pow(x, 2.0f), 2.0f) * 2.0f;
  EXPECT_EQ(pendingFulls(), 3u) << rec().traceListing();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 32}));
}

TEST_F(RecorderTest, FullTensorsAreNeverShared) {
  // A user's full() may become a parameter that an optimizer updates in
  // place: two equal ones stay two tensors.
  Tensor p = full({}, 1.0f);
  Tensor q = full({}, 1.0f);
  EXPECT_EQ(pendingFulls(), 2u);
  EXPECT_NE(p.impl(), q.impl());
  sync();
}

TEST_F(RecorderTest, ListingShowsNodes) {
  Tensor a = from_vector<float>({1}, {1});
  Tensor b = exp(a);
  std::string listing = rec().traceListing();
  EXPECT_NE(listing.find("param"), std::string::npos) << listing;
  EXPECT_NE(listing.find("exp"), std::string::npos) << listing;
  sync();
}

}  // namespace
}  // namespace kiln
