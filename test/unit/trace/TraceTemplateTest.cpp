// TraceTemplate: a captured trace run on new inputs gives what recording the
// same ops again gives (values and TraceKey), in both tiers, and misuse is a
// clear error that loses nothing.
#include "kiln/trace_template.h"

#include <gtest/gtest.h>

#include <thread>

#include "kiln/kiln.h"
#include "runtime/api/OpSupport.h"
#include "runtime/trace/Recorder.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

class TraceTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override { sync(); }
};

/// The program captured below: two outputs, a constant, a reduction.
std::vector<Tensor> program(const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor h = relu(matmul(x, w) + bias);
  return {softmax(h, -1), sum(h * h)};
}

Tensor randomTensor(const Shape& shape, uint64_t seed) {
  Tensor t = randn(shape, seed);
  t.data();  // materialized: templates read materialized inputs
  return t;
}

void expectSame(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

TEST_F(TraceTemplateTest, RunsLikeRecordingAgainWithTheSameKey) {
  Tensor bias = randomTensor({16}, 3);
  Tensor x0 = randomTensor({8, 32}, 1), w0 = randomTensor({32, 16}, 2);
  std::vector<Tensor> first = program(x0, w0, bias);
  Tensor inputs0[] = {x0, w0};
  TraceTemplate tmpl = TraceTemplate::capture(inputs0, std::span(&bias, 1), first);
  EXPECT_EQ(tmpl.num_inputs(), 2u);
  EXPECT_EQ(tmpl.num_outputs(), 2u);
  EXPECT_GT(tmpl.num_ops(), 4u);
  step();  // capture leaves the trace pending: it computes as usual
  EXPECT_TRUE(first[0].is_materialized());

  Tensor x1 = randomTensor({8, 32}, 11), w1 = randomTensor({32, 16}, 12);
  std::vector<Tensor> again = program(x1, w1, bias);
  step();
  const trace::TraceKey recordedKey = trace::Recorder::current().lastKey();

  reset_stats();
  Tensor inputs1[] = {x1, w1};
  std::vector<Tensor> replayed = tmpl.run(inputs1);
  EXPECT_EQ(trace::Recorder::current().lastKey(), recordedKey);
  EXPECT_EQ(stats().traces_recorded, 1u);
  EXPECT_EQ(stats().ops_recorded, tmpl.num_ops());
  ASSERT_EQ(replayed.size(), 2u);
  EXPECT_TRUE(replayed[0].is_materialized());
  expectSame(replayed[0], again[0]);
  expectSame(replayed[1], again[1]);
}

TEST_F(TraceTemplateTest, CompiledRunsMatchTheInterpreter) {
  Tensor bias = randomTensor({16}, 3);
  Tensor x = randomTensor({8, 32}, 1), w = randomTensor({32, 16}, 2);
  std::vector<Tensor> interpreted;
  TraceTemplate tmpl = [&] {
    JitScope off(JitMode::Off);
    interpreted = program(x, w, bias);
    Tensor inputs[] = {x, w};
    TraceTemplate t = TraceTemplate::capture(inputs, std::span(&bias, 1), interpreted);
    step();
    return t;
  }();
  JitScope sync(JitMode::Sync, 1);
  reset_stats();
  Tensor inputs[] = {x, w};
  std::vector<Tensor> compiled = tmpl.run(inputs);
  compiled = tmpl.run(inputs);
  EXPECT_GE(stats().compiled_runs, 1u);
  for (int i = 0; i < 2; ++i) {
    std::vector<float> want = interpreted[i].to_vector<float>(), got = compiled[i].to_vector<float>();
    ASSERT_EQ(want.size(), got.size());
    for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-4f * (1 + std::abs(want[j])));
  }
}

TEST_F(TraceTemplateTest, OutputsMayBeInputsConstantsOrOneValueTwice) {
  Tensor c = from_vector<float>({10, 20}, {2});
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor y = x + c;
  Tensor inputs[] = {x};
  Tensor outputs[] = {y, x, c, y};
  TraceTemplate tmpl = TraceTemplate::capture(inputs, std::span(&c, 1), outputs);
  step();
  Tensor x2 = from_vector<float>({5, 6}, {2});
  std::vector<Tensor> out = tmpl.run(std::span(&x2, 1));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{15, 26}));
  EXPECT_EQ(out[1].impl(), x2.impl());
  EXPECT_EQ(out[2].impl(), c.impl());
  EXPECT_EQ(out[3].impl(), out[0].impl());
}

TEST_F(TraceTemplateTest, PendingOpsBeforeARunAreComputedFirst) {
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  Tensor y = x * 3.0f;
  Tensor inputs[] = {x};
  TraceTemplate tmpl = TraceTemplate::capture(inputs, {}, std::span(&y, 1));
  step();
  Tensor a = from_vector<float>({1, 1, 1}, {3});
  Tensor pending = a + 1.0f;     // recorded, not computed
  Tensor input = pending * 2.0f;  // a pending input: computed before the run
  std::vector<Tensor> out = tmpl.run(std::span(&input, 1));
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{12, 12, 12}));
  EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST_F(TraceTemplateTest, AnyThreadRunsATemplate) {
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor y = exp(x) - 1.0f;
  TraceTemplate tmpl = TraceTemplate::capture(std::span(&x, 1), {}, std::span(&y, 1));
  step();
  std::vector<float> got;
  std::thread([&] {
    Tensor z = from_vector<float>({0, 0}, {2});
    got = tmpl.run(std::span(&z, 1))[0].to_vector<float>();
  }).join();
  EXPECT_EQ(got, (std::vector<float>{0, 0}));
}

TEST_F(TraceTemplateTest, CaptureRefusesTracesItCouldNotReplay) {
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor other = from_vector<float>({3, 4}, {2});
  Tensor y = x + other;
  // `other` is read but declared neither input nor constant.
  try {
    TraceTemplate::capture(std::span(&x, 1), {}, std::span(&y, 1));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither an input nor a constant"), std::string::npos) << e.what();
  }
  // Nothing recorded was lost.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 6}));

  // An output computed by an earlier flush (the ops were not all recorded in this trace).
  Tensor early = x * 2.0f;
  step();
  Tensor late = early + x;
  EXPECT_THROW(TraceTemplate::capture(std::span(&x, 1), {}, std::span(&late, 1)), Error);  // reads `early`
  step();
  EXPECT_THROW(TraceTemplate::capture(std::span(&x, 1), {}, std::span(&early, 1)), Error);  // not in the trace
  // A pending input would be computed by the captured ops, not replaced.
  Tensor pendingInput = x + 1.0f;
  Tensor z = pendingInput * 2.0f;
  EXPECT_THROW(TraceTemplate::capture(std::span(&pendingInput, 1), {}, std::span(&z, 1)), Error);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{4, 6}));
}

TEST_F(TraceTemplateTest, RunRefusesOtherInputsBeforeRecordingAnything) {
  Tensor x = from_vector<float>({1, 2}, {2});
  Tensor y = x * x;
  TraceTemplate tmpl = TraceTemplate::capture(std::span(&x, 1), {}, std::span(&y, 1));
  step();
  Tensor pending = x + 5.0f;
  auto expectError = [&](std::span<const Tensor> inputs, const char* text) {
    try {
      tmpl.run(inputs);
      FAIL() << "expected kiln::Error containing " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Tensor wrongShape = from_vector<float>({1, 2, 3}, {3});
  Tensor wrongType = from_vector<double>({1, 2}, {2});
  expectError(std::span(&wrongShape, 1), "captured with f32[2]");
  expectError(std::span(&wrongType, 1), "captured with f32[2]");
  expectError({}, "takes 1 input(s), got 0");
  EXPECT_FALSE(pending.is_materialized());  // refused before anything was flushed or recorded
  EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{6, 7}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST_F(TraceTemplateTest, GraphOutputsGetMemoryNothingElseReaches) {
  // What a framework's compiled graph hands back the caller may write
  // (api::giveExclusiveBuffers): a constant passed through, a view of it,
  // a value returned twice and a view of an input are copied; a fresh
  // result keeps its buffer.
  Tensor constant = randomTensor({2, 3}, 7);
  Tensor x = randomTensor({2, 3}, 8);
  Tensor fresh = x * 2.0f;
  TraceTemplate t = TraceTemplate::capture(std::vector<Tensor>{x}, std::vector<Tensor>{constant},
                                           std::vector<Tensor>{fresh, constant, reshape(constant, {6}),
                                                               reshape(x, {3, 2}), fresh});
  sync();
  Tensor x2 = randomTensor({2, 3}, 9);
  std::vector<Tensor> outputs = t.run(std::vector<Tensor>{x2});
  // The fresh result's memory is its own; the views and the repeat share.
  const std::vector<bool> shared = api::sharedMemory(outputs);
  EXPECT_FALSE(shared[0]);
  EXPECT_TRUE(shared[2] && shared[3] && shared[4]);
  std::vector<const void*> before;
  for (const Tensor& o : outputs) before.push_back(o.data());
  EXPECT_EQ(api::giveExclusiveBuffers(outputs), 4);  // the constant too: another handle holds it
  EXPECT_EQ(outputs[0].data(), before[0]);
  for (size_t k = 1; k < outputs.size(); ++k) EXPECT_NE(outputs[k].data(), before[k]) << k;
  for (bool s : api::sharedMemory(outputs)) EXPECT_FALSE(s);
  expectSame(outputs[1], constant);
  expectSame(outputs[3], reshape(x2, {3, 2}));
  expectSame(outputs[4], x2 * 2.0f);
  // The constant itself is untouched, and still the template's.
  EXPECT_EQ(constant.data(), before[1]);
}

}  // namespace
}  // namespace kiln
