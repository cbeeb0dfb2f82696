// Explicit capture: kiln_function replays the captured ops through the
// public API (one trace per call, whose TraceKey repeats), checks its
// signature, and takes/returns DLPack tensors.
#include <cmath>
#include <thread>

#include "CApiTestUtil.h"

namespace kiln::capitest {
namespace {

/// Captures f(x, w, b) = softmax(relu(x @ w + b) * 0.5, axis -1).
kiln_function captureLayer(kiln_tensor x, kiln_tensor w, kiln_tensor b, uint32_t flags = KILN_CAPTURE_DEFAULT) {
  kiln_tensor ins[3] = {x, w, b};
  EXPECT_EQ(kiln_capture_begin(ins, 3), KILN_OK) << kiln_last_error();
  kiln_value mm[2] = {kiln_value_of_tensor(x), kiln_value_of_tensor(w)};
  kiln_tensor h, hb, r, s, out;
  EXPECT_EQ(kiln_call(KILN_OP_MATMUL, mm, 2, nullptr, 0, &h), KILN_OK);
  kiln_value add[2] = {kiln_value_of_tensor(h), kiln_value_of_tensor(b)};
  EXPECT_EQ(kiln_call(KILN_OP_ADD, add, 2, nullptr, 0, &hb), KILN_OK);
  kiln_value relu = kiln_value_of_tensor(hb);
  EXPECT_EQ(kiln_call_by_name("relu", &relu, 1, nullptr, 0, &r), KILN_OK);
  kiln_value half[2] = {kiln_value_of_tensor(r), kiln_value_of_float(0.5)};
  EXPECT_EQ(kiln_call(KILN_OP_MUL, half, 2, nullptr, 0, &s), KILN_OK);
  kiln_value sm = kiln_value_of_tensor(s);
  kiln_attr axis = kiln_attr_int("axis", -1);
  EXPECT_EQ(kiln_call(KILN_OP_SOFTMAX, &sm, 1, &axis, 1, &out), KILN_OK);
  kiln_function fn = nullptr;
  EXPECT_EQ(kiln_capture_end(&out, 1, flags, &fn), KILN_OK) << kiln_last_error();
  for (kiln_tensor t : {h, hb, r, s, out}) kiln_tensor_release(t);
  return fn;
}

std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                             int m, int k, int n) {
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i) {
    double mx = -1e30;
    std::vector<double> row(n);
    for (int j = 0; j < n; ++j) {
      double acc = b[j];
      for (int p = 0; p < k; ++p) acc += double(x[i * k + p]) * w[p * n + j];
      row[j] = std::max(acc, 0.0) * 0.5;
      mx = std::max(mx, row[j]);
    }
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - mx);
    for (int j = 0; j < n; ++j) out[i * n + j] = static_cast<float>(row[j] / sum);
  }
  return out;
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

class CApiCapture : public ::testing::Test {
 protected:
  std::vector<float> xv = {1, 2, 3, 4, 5, 6}, wv = {0.5, -1, 1, 0.25, -0.5, 2, 1, 0, 0.1, 0.2, 0.3, 0.4},
                     bv = {0.1, 0.2, 0.3, 0.4};
};

TEST_F(CApiCapture, CapturedFunctionReplaysOnNewInputs) {
  kiln_tensor x = fromFloats(xv, {2, 3}), w = fromFloats(wv, {3, 4}), b = fromFloats(bv, {4});
  kiln_function fn = captureLayer(x, w, b);
  ASSERT_NE(fn, nullptr);
  int32_t n;
  KILN_ASSERT_OK(kiln_function_num_inputs(fn, &n));
  EXPECT_EQ(n, 3);
  KILN_ASSERT_OK(kiln_function_num_outputs(fn, &n));
  EXPECT_EQ(n, 1);
  KILN_ASSERT_OK(kiln_function_num_ops(fn, &n));
  EXPECT_EQ(n, 5);
  kiln_dtype dt;
  int64_t dims[8];
  int32_t rank;
  KILN_ASSERT_OK(kiln_function_signature(fn, 1, 0, &dt, dims, 8, &rank));
  EXPECT_EQ(dt, KILN_DTYPE_F32);
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], 4);

  std::vector<float> x2 = {-1, 0.5, 2, 3, -3, 1};
  kiln_tensor nx = fromFloats(x2, {2, 3});
  kiln_tensor ins[3] = {nx, w, b};
  kiln_tensor out = nullptr;
  kiln_stats before{};
  before.struct_size = sizeof before;
  KILN_ASSERT_OK(kiln_function_call(fn, ins, 3, &out, 1));
  int32_t m;
  KILN_ASSERT_OK(kiln_tensor_is_materialized(out, &m));
  EXPECT_EQ(m, 1);
  expectNear(toFloats(out), reference(x2, wv, bv, 2, 3, 4));
  kiln_tensor_release(out);
  // Calls repeat one TraceKey: one trace per call, no new keys.
  KILN_ASSERT_OK(kiln_get_stats(&before));
  for (int i = 0; i < 4; ++i) {
    KILN_ASSERT_OK(kiln_function_call(fn, ins, 3, &out, 1));
    kiln_tensor_release(out);
  }
  kiln_stats after{};
  after.struct_size = sizeof after;
  KILN_ASSERT_OK(kiln_get_stats(&after));
  EXPECT_EQ(after.traces_recorded, before.traces_recorded + 4);
  EXPECT_EQ(after.distinct_trace_keys, before.distinct_trace_keys);
  for (kiln_tensor t : {x, w, b, nx}) kiln_tensor_release(t);
  KILN_ASSERT_OK(kiln_function_release(fn));
}

TEST_F(CApiCapture, SignatureMismatchIsAClearError) {
  kiln_tensor x = fromFloats(xv, {2, 3}), w = fromFloats(wv, {3, 4}), b = fromFloats(bv, {4});
  kiln_function fn = captureLayer(x, w, b);
  kiln_tensor bigger = fromFloats(std::vector<float>(9, 1), {3, 3});
  kiln_tensor ins[3] = {bigger, w, b};
  kiln_tensor out = nullptr;
  expectError(kiln_function_call(fn, ins, 3, &out, 1), KILN_ERROR_SHAPE,
              {"input 0", "f32 [3, 3]", "captured with f32 [2, 3]"});
  double dv[6] = {};
  int64_t shape[2] = {2, 3};
  kiln_tensor xd;
  KILN_ASSERT_OK(kiln_tensor_from_host(dv, sizeof dv, KILN_DTYPE_F64, shape, 2, &xd));
  ins[0] = xd;
  expectError(kiln_function_call(fn, ins, 3, &out, 1), KILN_ERROR_DTYPE, {"input 0", "f64", "captured with f32"});
  expectError(kiln_function_call(fn, ins, 2, &out, 1), KILN_ERROR_INVALID_ARGUMENT, {"takes 3 input(s), got 2"});
  ins[0] = x;
  expectError(kiln_function_call(fn, ins, 3, &out, 2), KILN_ERROR_INVALID_ARGUMENT, {"1 output(s)"});
  EXPECT_EQ(out, nullptr);
  for (kiln_tensor t : {x, w, b, bigger, xd}) kiln_tensor_release(t);
  kiln_function_release(fn);
}

TEST_F(CApiCapture, DLPackInAndOut) {
  kiln_tensor x = fromFloats(xv, {2, 3}), w = fromFloats(wv, {3, 4}), b = fromFloats(bv, {4});
  kiln_function fn = captureLayer(x, w, b, KILN_CAPTURE_COMPILE_NOW);
  for (kiln_tensor t : {x, w, b}) kiln_tensor_release(t);
  std::atomic<int> deleted{0};
  std::vector<float> x2 = {0, 1, 0, 1, 0, 1};
  DLManagedTensor* ins[3] = {makeOwnedDL(x2, {2, 3}, &deleted), makeOwnedDL(wv, {3, 4}, &deleted),
                             makeOwnedDL(bv, {4}, &deleted)};
  DLManagedTensor* out = nullptr;
  KILN_ASSERT_OK(kiln_function_call_dlpack(fn, ins, 3, &out, 1));
  EXPECT_EQ(deleted.load(), 3) << "inputs consumed, each deleter exactly once";
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->dl_tensor.ndim, 2);
  std::vector<float> got(static_cast<float*>(out->dl_tensor.data), static_cast<float*>(out->dl_tensor.data) + 8);
  expectNear(got, reference(x2, wv, bv, 2, 3, 4));
  out->deleter(out);

  // Argument errors leave ownership with the caller.
  DLManagedTensor* bad[3] = {makeOwnedDL(std::vector<float>(9), {3, 3}, &deleted), makeOwnedDL(wv, {3, 4}, &deleted),
                             makeOwnedDL(bv, {4}, &deleted)};
  out = nullptr;
  expectError(kiln_function_call_dlpack(fn, bad, 3, &out, 1), KILN_ERROR_SHAPE, {"input 0"});
  EXPECT_EQ(deleted.load(), 3);
  EXPECT_EQ(out, nullptr);
  DLManagedTensor* dup[3] = {bad[1], bad[1], bad[2]};
  expectError(kiln_function_call_dlpack(fn, dup, 3, &out, 1), KILN_ERROR_INVALID_ARGUMENT, {"same DLManagedTensor"});
  for (DLManagedTensor* m : bad) freeDL(m);
  EXPECT_EQ(deleted.load(), 3);
  kiln_function_release(fn);
}

// An output that cannot be exported (it lives on the test device, which
// DLPack has no type for) fails after the inputs were taken: the status
// says so (KILN_ERROR_OP), so the caller does not run their deleters again.
TEST_F(CApiCapture, DLPackExportFailureReportsTheInputsConsumed) {
  kiln_tensor x = fromFloats({1, 2, 3, 4}, {4});
  KILN_ASSERT_OK(kiln_capture_begin(&x, 1));
  kiln_tensor onDevice;
  if (kiln_tensor_to_device(x, kiln_device{KILN_DEVICE_TEST, 0}, &onDevice) != KILN_OK) {
    kiln_function none;
    kiln_capture_end(&x, 1, KILN_CAPTURE_DEFAULT, &none);
    kiln_function_release(none);
    kiln_tensor_release(x);
    GTEST_SKIP() << "needs KILN_TEST_DEVICES (the kiln_capi_tests_test_device run)";
  }
  kiln_function fn;
  KILN_ASSERT_OK(kiln_capture_end(&onDevice, 1, KILN_CAPTURE_DEFAULT, &fn));
  std::atomic<int> deleted{0};
  DLManagedTensor* in[1] = {makeOwnedDL({5, 6, 7, 8}, {4}, &deleted)};
  DLManagedTensor* out = nullptr;
  expectError(kiln_function_call_dlpack(fn, in, 1, &out, 1), KILN_ERROR_OP, {"the inputs were consumed"});
  EXPECT_EQ(deleted.load(), 1) << "consumed: Kiln ran the deleter, once";
  EXPECT_EQ(out, nullptr);
  for (kiln_tensor t : {x, onDevice}) kiln_tensor_release(t);
  kiln_function_release(fn);
}

TEST_F(CApiCapture, ConstantsAndScalarsAreCaptured) {
  kiln_tensor x = fromFloats({1, 2, 3}, {3});
  kiln_tensor c = fromFloats({10, 20, 30}, {3});  // not an input: a constant
  KILN_ASSERT_OK(kiln_capture_begin(&x, 1));
  kiln_value in[2] = {kiln_value_of_tensor(x), kiln_value_of_tensor(c)};
  kiln_tensor y, z;
  KILN_ASSERT_OK(kiln_call(KILN_OP_ADD, in, 2, nullptr, 0, &y));
  kiln_value in2[2] = {kiln_value_of_tensor(y), kiln_value_of_int(2)};
  KILN_ASSERT_OK(kiln_call(KILN_OP_MUL, in2, 2, nullptr, 0, &z));
  kiln_tensor outs[2] = {z, x};  // an input may be an output too
  kiln_function fn;
  KILN_ASSERT_OK(kiln_capture_end(outs, 2, KILN_CAPTURE_DEFAULT, &fn));
  kiln_tensor_release(c);  // the function keeps its constant
  kiln_tensor nx = fromFloats({0, 0, 1}, {3});
  kiln_tensor res[2];
  KILN_ASSERT_OK(kiln_function_call(fn, &nx, 1, res, 2));
  EXPECT_EQ(toFloats(res[0]), (std::vector<float>{20, 40, 62}));
  EXPECT_EQ(toFloats(res[1]), (std::vector<float>{0, 0, 1}));
  for (kiln_tensor t : {x, y, z, nx, res[0], res[1]}) kiln_tensor_release(t);
  kiln_function_release(fn);
}

TEST_F(CApiCapture, CaptureStateErrors) {
  kiln_tensor x = fromFloats({1}, {1});
  kiln_function fn = nullptr;
  expectError(kiln_capture_end(&x, 1, 0, &fn), KILN_ERROR_STATE, {"kiln_capture_begin"});
  expectError(kiln_capture_abort(), KILN_ERROR_STATE);
  kiln_tensor twice[2] = {x, x};
  expectError(kiln_capture_begin(twice, 2), KILN_ERROR_INVALID_ARGUMENT, {"same tensor"});
  KILN_ASSERT_OK(kiln_capture_begin(&x, 1));
  expectError(kiln_capture_begin(&x, 1), KILN_ERROR_STATE, {"already in progress"});
  expectError(kiln_capture_end(&x, 1, 0x80, &fn), KILN_ERROR_INVALID_ARGUMENT, {"flags"});
  expectError(kiln_capture_end(nullptr, 0, 0, &fn), KILN_ERROR_INVALID_ARGUMENT, {"at least one output"});
  KILN_ASSERT_OK(kiln_capture_abort());
  EXPECT_EQ(fn, nullptr);
  // Another thread has no capture of its own.
  KILN_ASSERT_OK(kiln_capture_begin(&x, 1));
  std::thread([&] {
    kiln_function f = nullptr;
    expectError(kiln_capture_end(&x, 1, 0, &f), KILN_ERROR_STATE);
  }).join();
  KILN_ASSERT_OK(kiln_capture_end(&x, 1, 0, &fn));
  KILN_ASSERT_OK(kiln_function_release(fn));
  expectError(kiln_function_release(fn), KILN_ERROR_INVALID_HANDLE, {"already released"});
  kiln_tensor_release(x);
}

}  // namespace
}  // namespace kiln::capitest
