// Ops through the C ABI: every op by enum and by name, typed attributes,
// scalar operands, and the same recording (and TraceKeys) as C++ calls.
#include <cmath>

#include "CApiTestUtil.h"
#include "kiln/kiln.h"

namespace kiln::capitest {
namespace {

struct OwnedCall {
  std::vector<kiln_value> inputs;
  std::vector<kiln_attr> attrs;
};

class CApiOps : public ::testing::Test {
 protected:
  void SetUp() override {
    x = fromFloats({1, -2, 3, -4, 5, -6}, {2, 3});
    w = fromFloats({1, 0, 0, 1, 1, 1}, {3, 2});
    int64_t idx[2] = {2, 0};
    int64_t ishape[1] = {2};
    ASSERT_EQ(kiln_tensor_from_host(idx, sizeof idx, KILN_DTYPE_I64, ishape, 1, &index), KILN_OK);
    int64_t gidx[6] = {0, 1, 2, 2, 1, 0};
    int64_t gshape[2] = {2, 3};
    ASSERT_EQ(kiln_tensor_from_host(gidx, sizeof gidx, KILN_DTYPE_I64, gshape, 2, &gindex), KILN_OK);
  }
  void TearDown() override {
    for (kiln_tensor t : {x, w, index, gindex}) kiln_tensor_release(t);
  }
  kiln_tensor run(kiln_op op, std::vector<kiln_value> in, std::vector<kiln_attr> attrs = {}) {
    kiln_tensor out = nullptr;
    kiln_status s = kiln_call(op, in.data(), static_cast<int32_t>(in.size()), attrs.data(),
                              static_cast<int32_t>(attrs.size()), &out);
    const char* name = "?";
    kiln_op_name(op, &name);
    EXPECT_EQ(s, KILN_OK) << name << ": " << kiln_last_error();
    return out;
  }
  kiln_tensor x, w, index, gindex;
};

TEST_F(CApiOps, NamesRoundTrip) {
  int count = 0;
  for (int op = 0; op < 200; ++op) {
    const char* name = nullptr;
    if (kiln_op_name(static_cast<kiln_op>(op), &name) != KILN_OK) continue;
    ++count;
    kiln_op back;
    KILN_ASSERT_OK(kiln_op_from_name(name, &back));
    EXPECT_EQ(back, op) << name;
  }
  EXPECT_EQ(count, 88);  // every public op
}

TEST_F(CApiOps, EveryOpRuns) {
  const int64_t axes1[1] = {1}, shape23[2] = {2, 3}, shape32[2] = {3, 2}, perm[2] = {1, 0}, shape223[3] = {2, 2, 3};
  kiln_value X = kiln_value_of_tensor(x), W = kiln_value_of_tensor(w);
  struct Case {
    kiln_op op;
    std::vector<kiln_value> in;
    std::vector<kiln_attr> attrs;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases;
  auto C = [&](kiln_op op, std::vector<kiln_value> in, std::vector<kiln_attr> at, std::vector<int64_t> sh) {
    cases.push_back(Case{op, std::move(in), std::move(at), std::move(sh)});
  };
  C(KILN_OP_ZEROS, {}, {kiln_attr_ints("shape", shape23, 2)}, {2, 3});
  C(KILN_OP_ONES, {}, {kiln_attr_ints("shape", shape23, 2), kiln_attr_dtype("dtype", KILN_DTYPE_I32)}, {2, 3});
  C(KILN_OP_FULL, {}, {kiln_attr_ints("shape", shape23, 2), kiln_attr_float("value", 2.5)}, {2, 3});
  C(KILN_OP_ZEROS_LIKE, {X}, {}, {2, 3});
  C(KILN_OP_ONES_LIKE, {X}, {}, {2, 3});
  C(KILN_OP_SCALAR_TENSOR, {}, {kiln_attr_int("value", 3)}, {});
  C(KILN_OP_ARANGE, {}, {kiln_attr_float("end", 5)}, {5});
  C(KILN_OP_RAND, {}, {kiln_attr_ints("shape", shape23, 2), kiln_attr_int("seed", 7)}, {2, 3});
  C(KILN_OP_RANDN, {}, {kiln_attr_ints("shape", shape23, 2), kiln_attr_int("seed", 7)}, {2, 3});
  C(KILN_OP_WHERE, {kiln_value_of_tensor(run(KILN_OP_GT, {X, kiln_value_of_float(0)})), X, kiln_value_of_float(0)}, {}, {2, 3});
  C(KILN_OP_CLAMP, {X, kiln_value_of_float(-1), kiln_value_of_float(1)}, {}, {2, 3});
  C(KILN_OP_CAST, {X}, {kiln_attr_dtype("dtype", KILN_DTYPE_F64)}, {2, 3});
  C(KILN_OP_ARGMAX, {X}, {kiln_attr_int("axis", 1)}, {2});
  C(KILN_OP_ARGMIN, {X}, {kiln_attr_int("axis", 1), kiln_attr_bool("keepdim", 1)}, {2, 1});
  C(KILN_OP_MATMUL, {X, W}, {}, {2, 2});
  C(KILN_OP_RESHAPE, {X}, {kiln_attr_ints("shape", shape32, 2)}, {3, 2});
  C(KILN_OP_TRANSPOSE, {X}, {}, {3, 2});
  C(KILN_OP_PERMUTE, {X}, {kiln_attr_ints("perm", perm, 2)}, {3, 2});
  C(KILN_OP_BROADCAST_TO, {X}, {kiln_attr_ints("shape", shape223, 3)}, {2, 2, 3});
  C(KILN_OP_SQUEEZE, {kiln_value_of_tensor(run(KILN_OP_UNSQUEEZE, {X}, {kiln_attr_int("axis", 0)}))}, {}, {2, 3});
  C(KILN_OP_UNSQUEEZE, {X}, {kiln_attr_int("axis", -1)}, {2, 3, 1});
  C(KILN_OP_SLICE, {X}, {kiln_attr_int("axis", 1), kiln_attr_int("start", 1)}, {2, 2});
  C(KILN_OP_CONCAT, {X, X, X}, {kiln_attr_int("axis", 0)}, {6, 3});
  C(KILN_OP_INDEX_SELECT, {X, kiln_value_of_tensor(index)}, {kiln_attr_int("axis", 1)}, {2, 2});
  C(KILN_OP_GATHER, {X, kiln_value_of_tensor(gindex)}, {kiln_attr_int("axis", 1)}, {2, 3});
  C(KILN_OP_INDEX_ADD,
    {X, kiln_value_of_tensor(index),
     kiln_value_of_tensor(run(KILN_OP_INDEX_SELECT, {X, kiln_value_of_tensor(index)}, {kiln_attr_int("axis", 1)}))},
    {kiln_attr_int("axis", 1)}, {2, 3});
  C(KILN_OP_SCATTER_ADD, {X, kiln_value_of_tensor(gindex), X}, {kiln_attr_int("axis", 1)}, {2, 3});
  C(KILN_OP_CUMSUM, {X}, {kiln_attr_int("axis", 1)}, {2, 3});
  C(KILN_OP_ONE_HOT, {kiln_value_of_tensor(index)}, {kiln_attr_int("num_classes", 4)}, {2, 4});
  C(KILN_OP_CONTIGUOUS, {kiln_value_of_tensor(run(KILN_OP_TRANSPOSE, {X}))}, {}, {3, 2});
  C(KILN_OP_SOFTMAX, {X}, {}, {2, 3});
  C(KILN_OP_LOG_SOFTMAX, {X}, {kiln_attr_int("axis", 0)}, {2, 3});
  C(KILN_OP_LAYER_NORM, {X, kiln_value_none(), kiln_value_none()}, {kiln_attr_float("eps", 1e-3)}, {2, 3});
  C(KILN_OP_CROSS_ENTROPY, {X, kiln_value_of_tensor(index)}, {}, {});

  C(KILN_OP_LEAKY_RELU, {X}, {kiln_attr_float("negative_slope", 0.2)}, {2, 3});
  const int64_t nchw[4] = {1, 1, 2, 3}, oihw[4] = {2, 1, 1, 3}, two[1] = {2}, one[1] = {1};
  kiln_value X4 = kiln_value_of_tensor(run(KILN_OP_RESHAPE, {X}, {kiln_attr_ints("shape", nchw, 4)}));
  kiln_value W4 = kiln_value_of_tensor(run(KILN_OP_RESHAPE, {X}, {kiln_attr_ints("shape", oihw, 4)}));
  C(KILN_OP_CONV2D, {X4, W4}, {}, {1, 2, 2, 1});
  C(KILN_OP_MAX_POOL2D, {X4}, {kiln_attr_ints("kernel_shape", two, 1)}, {1, 1, 1, 2});
  C(KILN_OP_AVG_POOL2D, {X4}, {kiln_attr_ints("kernel_shape", two, 1), kiln_attr_ints("pads", one, 1)}, {1, 1, 3, 4});
  C(KILN_OP_ADAPTIVE_AVG_POOL2D, {X4}, {kiln_attr_ints("output_size", one, 1)}, {1, 1, 1, 1});
  C(KILN_OP_BATCH_NORM, {X}, {kiln_attr_bool("training_mode", 1)}, {2, 3});
  for (kiln_op op : {KILN_OP_EXPM1, KILN_OP_LOG1P, KILN_OP_ISNAN, KILN_OP_ISINF, KILN_OP_ATAN, KILN_OP_LOG2}) C(op, {X}, {}, {2, 3});
  for (kiln_op op : {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_DIV, KILN_OP_POW, KILN_OP_MAXIMUM, KILN_OP_MINIMUM,
                     KILN_OP_EQ, KILN_OP_NE, KILN_OP_LT, KILN_OP_LE, KILN_OP_GT, KILN_OP_GE, KILN_OP_FMOD,
                     KILN_OP_REMAINDER})
    C(op, {X, kiln_value_of_float(2)}, {}, {2, 3});
  for (kiln_op op : {KILN_OP_LOGICAL_AND, KILN_OP_LOGICAL_OR})
    C(op, {X, kiln_value_of_int(0)}, {}, {2, 3});
  for (int op = KILN_OP_LOGICAL_NOT; op <= KILN_OP_ERF; ++op) C(static_cast<kiln_op>(op), {X}, {}, {2, 3});
  for (int op = KILN_OP_SUM; op <= KILN_OP_PROD; ++op)
    C(static_cast<kiln_op>(op), {X}, {kiln_attr_ints("axes", axes1, 1)}, {2});

  int covered = 0;
  for (Case& c : cases) {
    const char* name = "?";
    KILN_ASSERT_OK(kiln_op_name(c.op, &name));
    kiln_tensor out = run(c.op, c.in, c.attrs);
    ASSERT_NE(out, nullptr) << name;
    EXPECT_EQ(shapeOf(out), c.shape) << name;
    // And by name, with the same result shape.
    kiln_tensor byName = nullptr;
    KILN_ASSERT_OK(kiln_call_by_name(name, c.in.data(), static_cast<int32_t>(c.in.size()), c.attrs.data(),
                                     static_cast<int32_t>(c.attrs.size()), &byName));
    EXPECT_EQ(shapeOf(byName), c.shape) << name;
    KILN_EXPECT_OK(kiln_sync());
    int32_t m = 0;
    KILN_ASSERT_OK(kiln_tensor_is_materialized(out, &m));
    EXPECT_EQ(m, 1) << name;
    kiln_tensor_release(out);
    kiln_tensor_release(byName);
    ++covered;
  }
  EXPECT_EQ(covered, 88);
  for (Case& c : cases)
    for (kiln_value& v : c.in)
      if (v.kind == KILN_VALUE_TENSOR && v.tensor != x && v.tensor != w && v.tensor != index && v.tensor != gindex)
        kiln_tensor_release(v.tensor);  // intermediate inputs made by run() above (released once each)
}

TEST_F(CApiOps, ValuesMatchTheCppApi) {
  const int64_t axes[1] = {1};
  kiln_tensor y = run(KILN_OP_MATMUL, {kiln_value_of_tensor(x), kiln_value_of_tensor(w)});
  kiln_tensor z = run(KILN_OP_GELU, {kiln_value_of_tensor(y)});
  kiln_tensor s = run(KILN_OP_SUM, {kiln_value_of_tensor(z)}, {kiln_attr_ints("axes", axes, 1), kiln_attr_bool("keepdim", 1)});
  Tensor cx = from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  Tensor cw = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  std::vector<float> want = sum(gelu(matmul(cx, cw)), {1}, true).to_vector<float>();
  std::vector<float> got = toFloats(s);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]);
  EXPECT_EQ(shapeOf(s), (std::vector<int64_t>{2, 1}));
  for (kiln_tensor t : {y, z, s}) kiln_tensor_release(t);
}

TEST_F(CApiOps, NewOpsMatchTheCppApi) {
  // x = {1, -2, 3, -4, 5, -6} as [2, 3].
  Tensor cx = from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  kiln_value X = kiln_value_of_tensor(x);
  auto same = [&](kiln_tensor got, const Tensor& want) {
    std::vector<float> g = toFloats(got), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(g[i], w[i]) << i;
    kiln_tensor_release(got);
  };
  same(run(KILN_OP_ERF, {X}), erf(cx));
  same(run(KILN_OP_EXPM1, {X}), expm1(cx));
  kiln_tensor absX = run(KILN_OP_ABS, {X}), nanX = run(KILN_OP_ISNAN, {X});
  same(run(KILN_OP_LOG1P, {kiln_value_of_tensor(absX)}), log1p(abs(cx)));
  same(run(KILN_OP_FMOD, {X, kiln_value_of_float(2.5)}), fmod(cx, 2.5));
  same(run(KILN_OP_REMAINDER, {X, kiln_value_of_float(2.5)}), remainder(cx, 2.5));
  same(run(KILN_OP_LEAKY_RELU, {X}, {kiln_attr_float("negative_slope", 0.25)}), leaky_relu(cx, 0.25));
  same(run(KILN_OP_GELU, {X}, {kiln_attr_bool("exact", 1)}), gelu_exact(cx));
  // A negative step with Python's defaults reverses the axis.
  same(run(KILN_OP_SLICE, {X}, {kiln_attr_int("axis", 1), kiln_attr_int("step", -1)}), flip(cx, {1}));
  same(run(KILN_OP_SLICE, {X}, {kiln_attr_int("axis", 1), kiln_attr_int("start", 1), kiln_attr_int("step", -1)}),
       slice(cx, 1, 1, INT64_MIN, -1));
  same(run(KILN_OP_CAST, {kiln_value_of_tensor(nanX)}, {kiln_attr_dtype("dtype", KILN_DTYPE_F32)}),
       cast(isnan(cx), DType::f32));
  kiln_tensor_release(absX);
  kiln_tensor_release(nanX);
  // index_add: x's columns 2 and 0 get source's two columns.
  kiln_tensor src = fromFloats({10, 20, 30, 40}, {2, 2});
  same(run(KILN_OP_INDEX_ADD, {X, kiln_value_of_tensor(index), kiln_value_of_tensor(src)}, {kiln_attr_int("axis", 1)}),
       index_add(cx, 1, from_vector<int64_t>({2, 0}, {2}), from_vector<float>({10, 20, 30, 40}, {2, 2})));
  kiln_tensor_release(src);
  // scatter_add: x's row 0 gets its own elements back at columns 0, 1, 2
  // (doubled), row 1's in reverse order.
  same(run(KILN_OP_SCATTER_ADD, {X, kiln_value_of_tensor(gindex), X}, {kiln_attr_int("axis", 1)}),
       from_vector<float>({2, -4, 6, -10, 10, -10}, {2, 3}));
  same(run(KILN_OP_CUMSUM, {X}, {kiln_attr_int("axis", -1)}), from_vector<float>({1, -1, 2, -4, 1, -5}, {2, 3}));
  // Ties: 2 appears twice; the last index is 3.
  kiln_tensor t = fromFloats({2, 1, 0, 2}, {4});
  kiln_value T = kiln_value_of_tensor(t);
  kiln_attr last[2] = {kiln_attr_int("axis", 0), kiln_attr_bool("select_last_index", 1)};
  kiln_tensor a = run(KILN_OP_ARGMAX, {T}, {last[0], last[1]});
  int64_t index = -1;
  KILN_ASSERT_OK(kiln_tensor_copy_to_host(a, &index, sizeof index, KILN_DTYPE_I64));
  EXPECT_EQ(index, 3);
  kiln_tensor_release(a);
  kiln_tensor_release(t);
}

TEST_F(CApiOps, ConvAndPoolingMatchTheCppApi) {
  std::vector<float> xv(2 * 4 * 5 * 5), wv(6 * 2 * 3 * 3), bv{0.5f, -1, 2, 0, 1, -0.25f};
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 11) - 5;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 5) % 7) * 0.25f - 0.75f;
  kiln_tensor cx = fromFloats(xv, {2, 4, 5, 5}), cw = fromFloats(wv, {6, 2, 3, 3}), cb = fromFloats(bv, {6});
  Tensor tx = from_vector<float>(xv, {2, 4, 5, 5}), tw = from_vector<float>(wv, {6, 2, 3, 3}), tb = from_vector<float>(bv, {6});
  auto same = [&](kiln_tensor got, const Tensor& want) {
    EXPECT_EQ(shapeOf(got), std::vector<int64_t>(want.shape().begin(), want.shape().end()));
    std::vector<float> g = toFloats(got), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(g[i], w[i]) << i;
    kiln_tensor_release(got);
  };
  const int64_t strides[2] = {2, 1}, pads[4] = {1, 0, 1, 2}, dil[2] = {1, 2}, k[2] = {3, 2}, out[2] = {2, 3};
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1, 0, 1, 2};
  o.dilation = {1, 2};
  o.groups = 2;
  same(run(KILN_OP_CONV2D, {kiln_value_of_tensor(cx), kiln_value_of_tensor(cw), kiln_value_of_tensor(cb)},
           {kiln_attr_ints("strides", strides, 2), kiln_attr_ints("pads", pads, 4), kiln_attr_ints("dilations", dil, 2),
            kiln_attr_int("group", 2)}),
       conv2d(tx, tw, tb, o));
  Conv2dOptions same_upper;
  same_upper.auto_pad = AutoPad::SameUpper;
  same_upper.groups = 2;
  same(run(KILN_OP_CONV2D, {kiln_value_of_tensor(cx), kiln_value_of_tensor(cw)},
           {kiln_attr_int("auto_pad", 2), kiln_attr_int("group", 2)}),
       conv2d(tx, tw, {}, same_upper));
  Pool2dOptions p;
  p.kernel = {3, 2};
  p.stride = {2, 1};
  p.padding = {1, 0, 1, 2};
  p.ceil_mode = true;
  p.count_include_pad = true;
  same(run(KILN_OP_AVG_POOL2D, {kiln_value_of_tensor(cx)},
           {kiln_attr_ints("kernel_shape", k, 2), kiln_attr_ints("strides", strides, 2), kiln_attr_ints("pads", pads, 4),
            kiln_attr_bool("ceil_mode", 1), kiln_attr_bool("count_include_pad", 1)}),
       avg_pool2d(tx, p));
  p.count_include_pad = false;
  p.layout = Layout::NHWC;
  same(run(KILN_OP_MAX_POOL2D, {kiln_value_of_tensor(cx)},
           {kiln_attr_ints("kernel_shape", k, 2), kiln_attr_ints("strides", strides, 2), kiln_attr_ints("pads", pads, 4),
            kiln_attr_bool("ceil_mode", 1), kiln_attr_bool("channels_last", 1)}),
       max_pool2d(tx, p));
  same(run(KILN_OP_ADAPTIVE_AVG_POOL2D, {kiln_value_of_tensor(cx)}, {kiln_attr_ints("output_size", out, 2)}),
       adaptive_avg_pool2d(tx, 2, 3));
  kiln_value none = kiln_value_none();
  same(run(KILN_OP_BATCH_NORM, {kiln_value_of_tensor(cx), none, none, none, none},
           {kiln_attr_bool("training_mode", 1), kiln_attr_float("epsilon", 1e-3)}),
       batch_norm(tx, {}, {}, {}, {}, true, 0.9, 1e-3).y);
  // Bad arguments: the shape error names the op; an unknown auto_pad is rejected.
  kiln_tensor bad = nullptr;
  kiln_value args[2] = {kiln_value_of_tensor(cx), kiln_value_of_tensor(cw)};
  EXPECT_EQ(kiln_call(KILN_OP_CONV2D, args, 2, nullptr, 0, &bad), KILN_ERROR_OP);
  EXPECT_NE(std::string(kiln_last_error()).find("conv2d"), std::string::npos) << kiln_last_error();
  kiln_attr pad9 = kiln_attr_int("auto_pad", 9);
  EXPECT_EQ(kiln_call(KILN_OP_CONV2D, args, 2, &pad9, 1, &bad), KILN_ERROR_INVALID_ARGUMENT);
  for (kiln_tensor t : {cx, cw, cb}) kiln_tensor_release(t);
}

TEST_F(CApiOps, ScalarsPromoteLikeCpp) {
  int32_t iv[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  kiln_tensor i;
  KILN_ASSERT_OK(kiln_tensor_from_host(iv, sizeof iv, KILN_DTYPE_I32, shape, 1, &i));
  kiln_dtype d;
  kiln_tensor a = run(KILN_OP_MUL, {kiln_value_of_tensor(i), kiln_value_of_int(2)});
  KILN_ASSERT_OK(kiln_tensor_dtype(a, &d));
  EXPECT_EQ(d, KILN_DTYPE_I32);
  kiln_tensor b = run(KILN_OP_MUL, {kiln_value_of_float(2.5), kiln_value_of_tensor(i)});
  KILN_ASSERT_OK(kiln_tensor_dtype(b, &d));
  EXPECT_EQ(d, KILN_DTYPE_F32);
  EXPECT_EQ(toFloats(b), (std::vector<float>{2.5, 5, 7.5}));
  for (kiln_tensor t : {i, a, b}) kiln_tensor_release(t);
}

TEST_F(CApiOps, RepeatedCallsRepeatTheirTraceKey) {
  auto iteration = [&] {
    kiln_tensor y = run(KILN_OP_MATMUL, {kiln_value_of_tensor(x), kiln_value_of_tensor(w)});
    kiln_tensor z = run(KILN_OP_RELU, {kiln_value_of_tensor(y)});
    KILN_EXPECT_OK(kiln_tensor_release(y));
    std::vector<float> v = toFloats(z);
    KILN_EXPECT_OK(kiln_tensor_release(z));
    return v;
  };
  iteration();
  kiln_stats before{};
  before.struct_size = sizeof before;
  KILN_ASSERT_OK(kiln_get_stats(&before));
  for (int i = 0; i < 3; ++i) iteration();
  kiln_stats after{};
  after.struct_size = sizeof after;
  KILN_ASSERT_OK(kiln_get_stats(&after));
  EXPECT_EQ(after.distinct_trace_keys, before.distinct_trace_keys);
  EXPECT_EQ(after.traces_recorded, before.traces_recorded + 3);
}

TEST_F(CApiOps, AttributeErrors) {
  kiln_value X = kiln_value_of_tensor(x);
  kiln_tensor out = nullptr;
  kiln_attr bad = kiln_attr_int("axis", 1);
  expectError(kiln_call(KILN_OP_SUM, &X, 1, &bad, 1, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"sum", "unknown attribute 'axis'", "axes, keepdim"});
  expectError(kiln_call(KILN_OP_ARGMAX, &X, 1, nullptr, 0, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"argmax", "missing required attribute 'axis'"});
  kiln_attr wrongKind = kiln_attr_float("axis", 1.5);
  expectError(kiln_call(KILN_OP_SOFTMAX, &X, 1, &wrongKind, 1, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"'axis' must be INT"});
  kiln_attr dt = kiln_attr_dtype("dtype", static_cast<kiln_dtype>(42));
  expectError(kiln_call(KILN_OP_CAST, &X, 1, &dt, 1, &out), KILN_ERROR_DTYPE, {"42"});
  kiln_attr twice[2] = {kiln_attr_int("axis", 0), kiln_attr_int("axis", 1)};
  expectError(kiln_call(KILN_OP_SOFTMAX, &X, 1, twice, 2, &out), KILN_ERROR_INVALID_ARGUMENT, {"twice"});
  int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  kiln_attr rank9 = kiln_attr_ints("shape", big, 9);
  expectError(kiln_call(KILN_OP_ZEROS, nullptr, 0, &rank9, 1, &out), KILN_ERROR_SHAPE, {"rank 9"});
  int64_t neg[2] = {2, -3};
  kiln_attr negShape = kiln_attr_ints("shape", neg, 2);
  expectError(kiln_call(KILN_OP_ZEROS, nullptr, 0, &negShape, 1, &out), KILN_ERROR_SHAPE, {"negative"});
  kiln_attr noName = kiln_attr_int(nullptr, 1);
  expectError(kiln_call(KILN_OP_SOFTMAX, &X, 1, &noName, 1, &out), KILN_ERROR_INVALID_ARGUMENT, {"NULL name"});
  kiln_attr badInts = kiln_attr_ints("axes", nullptr, 3);
  expectError(kiln_call(KILN_OP_SUM, &X, 1, &badInts, 1, &out), KILN_ERROR_INVALID_ARGUMENT, {"NULL ints"});
  kiln_attr badKind = kiln_attr_int("axes", 0);
  badKind.kind = 99;
  expectError(kiln_call(KILN_OP_SUM, &X, 1, &badKind, 1, &out), KILN_ERROR_INVALID_ARGUMENT, {"invalid kind"});
  EXPECT_EQ(out, nullptr) << "out is written only on success";
}

TEST_F(CApiOps, OpErrorsComeFromTheOp) {
  kiln_tensor b = fromFloats({1, 2}, {2});
  kiln_value in[2] = {kiln_value_of_tensor(x), kiln_value_of_tensor(b)};
  kiln_tensor out = nullptr;
  expectError(kiln_call(KILN_OP_ADD, in, 2, nullptr, 0, &out), KILN_ERROR_OP, {"add", "[2, 3]", "[2]"});
  expectError(kiln_call(KILN_OP_MATMUL, in, 2, nullptr, 0, &out), KILN_ERROR_OP, {"matmul"});
  expectError(kiln_call(KILN_OP_ADD, in, 1, nullptr, 0, &out), KILN_ERROR_INVALID_ARGUMENT, {"takes 2 input(s), got 1"});
  kiln_value scalars[2] = {kiln_value_of_float(1), kiln_value_of_float(2)};
  expectError(kiln_call(KILN_OP_ADD, scalars, 2, nullptr, 0, &out), KILN_ERROR_OP, {"at least one operand"});
  kiln_value notTensor = kiln_value_of_float(1);
  expectError(kiln_call(KILN_OP_EXP, &notTensor, 1, nullptr, 0, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"must be a tensor"});
  expectError(kiln_call(static_cast<kiln_op>(12345), nullptr, 0, nullptr, 0, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"unknown op 12345"});
  expectError(kiln_call_by_name("no_such_op", nullptr, 0, nullptr, 0, &out), KILN_ERROR_INVALID_ARGUMENT,
              {"no_such_op"});
  EXPECT_EQ(out, nullptr);
  // Earlier tensors are intact after the errors.
  EXPECT_EQ(toFloats(x), (std::vector<float>{1, -2, 3, -4, 5, -6}));
  kiln_tensor_release(b);
}

}  // namespace
}  // namespace kiln::capitest
