// Shape ops: reshape, transpose, permute, broadcast_to, squeeze, unsqueeze,
// slice, concat; chains of views; contiguous().
#include <atomic>
#include <chrono>

#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

/// A random shape with numel n (n > 0), possibly with one -1.
Dims randomReshapeTarget(Rng& rng, int64_t n, bool allowInfer) {
  std::vector<int64_t> factors;
  for (int64_t p = 2, m = n; m > 1;) {
    if (m % p == 0) factors.push_back(p), m /= p;
    else ++p;
  }
  int r = static_cast<int>(rng.randint(n == 1 ? 0 : 1, 4));
  Dims s(r, 1);
  for (int64_t f : factors) s[rng.randint(0, r - 1)] *= f;
  if (allowInfer && r > 0 && rng.coin(0.4)) s[rng.randint(0, r - 1)] = -1;
  return s;
}

Dims inferred(Dims s, int64_t n) {
  int64_t known = 1;
  for (int64_t d : s)
    if (d != -1) known *= d;
  for (auto& d : s)
    if (d == -1) d = n / known;
  return s;
}

void checkReshapeOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 0, 4, 5, 0.05);
  Input x = makeInput(rng, s, t);
  int64_t n = numelOf(s);
  Dims target;
  if (n == 0) {
    target = randomShape(rng, 1, 3, 4);
    target[rng.randint(0, static_cast<int64_t>(target.size()) - 1)] = 0;
  } else {
    target = randomReshapeTarget(rng, n, true);
  }
  SCOPED_TRACE("reshape(" + x.how + ", " + str(target) + ")");
  Tensor y = rng.coin() ? kiln::reshape(x.t, toShape(target)) : x.t.reshape(toShape(target));
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, Ref(inferred(target, n), x.r.v), {}));
}

TEST(OpsShape, ReshapeEveryDType) {
  Rng rng(kSeed + 50);
  for (DType t : kAllTypes)
    for (int it = 0; it < 20; ++it) checkReshapeOnce(rng, t);
}

TEST(OpsShape, ReshapeOfContiguousIsView) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = kiln::reshape(x, {3, -1});
  // data() is for host tensors (the suite also runs on the test device).
  if (x.device().kind == kiln::Device::CPU) EXPECT_EQ(y.data(), x.data());
  EXPECT_TRUE(near(y, Ref({3, 2}, {1, 2, 3, 4, 5, 6}), {}));
  Tensor one = kiln::from_vector(std::vector<int32_t>{7}, {1, 1});
  EXPECT_TRUE(near(kiln::reshape(one, {}), Ref({}, {7}), {}));
  EXPECT_TRUE(near(kiln::reshape(kiln::scalar_tensor(2.5), {1, 1, 1}), Ref({1, 1, 1}, {2.5}), {}));
  // A non-contiguous input is copied in logical (row-major) order.
  Tensor xt = kiln::transpose(x);
  EXPECT_TRUE(near(kiln::reshape(xt, {6}), Ref({6}, {1, 4, 2, 5, 3, 6}), {}));
  EXPECT_TRUE(near(kiln::reshape(kiln::ones({0, 3}), {3, 0, 5}), Ref({3, 0, 5}), {}));
}

void checkTransposeOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 5, 4, 0.05);
  int r = static_cast<int>(s.size());
  Input x = makeInput(rng, s, t);
  int a = static_cast<int>(rng.randint(-r, r - 1)), b = static_cast<int>(rng.randint(-r, r - 1));
  SCOPED_TRACE("transpose(" + x.how + ", " + std::to_string(a) + ", " + std::to_string(b) + ")");
  Tensor y = rng.coin() ? kiln::transpose(x.t, a, b) : x.t.transpose(a, b);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, transposeRef(x.r, a, b), {}));
  if (r >= 2) {
    EXPECT_TRUE(near(kiln::transpose(x.t), transposeRef(x.r, -2, -1), {}));
  }
}

TEST(OpsShape, TransposeEveryDType) {
  Rng rng(kSeed + 51);
  for (DType t : kAllTypes)
    for (int it = 0; it < 15; ++it) checkTransposeOnce(rng, t);
}

void checkPermuteOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 0, 5, 4, 0.05);
  Input x = makeInput(rng, s, t);
  std::vector<int> perm(s.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng.g);
  std::string ps;
  for (int p : perm) ps += std::to_string(p) + " ";
  SCOPED_TRACE("permute(" + x.how + ", " + ps + ")");
  Tensor y = rng.coin() ? kiln::permute(x.t, perm) : x.t.permute(perm);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, permuteRef(x.r, perm), {}));
}

TEST(OpsShape, PermuteEveryDType) {
  Rng rng(kSeed + 52);
  for (DType t : kAllTypes)
    for (int it = 0; it < 15; ++it) checkPermuteOnce(rng, t);
}

void checkBroadcastOnce(Rng& rng, DType t) {
  Dims target = randomShape(rng, 0, 4, 4, 0.05);
  size_t r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(target.size())));
  Dims s(target.end() - r, target.end());
  for (auto& d : s)
    if (rng.coin(0.5)) d = 1;
  Input x = makeInput(rng, s, t);
  SCOPED_TRACE("broadcast_to(" + x.how + ", " + str(target) + ")");
  Tensor y = kiln::broadcast_to(x.t, toShape(target));
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, broadcastRef(x.r, target), {}));
}

TEST(OpsShape, BroadcastToEveryDType) {
  Rng rng(kSeed + 53);
  for (DType t : kAllTypes)
    for (int it = 0; it < 15; ++it) checkBroadcastOnce(rng, t);
}

void checkSqueezeOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 0, 5, 3, 0.05);
  for (auto& d : s)
    if (rng.coin(0.4)) d = 1;
  int r = static_cast<int>(s.size());
  Input x = makeInput(rng, s, t);
  // squeeze: all extent-1 axes, or a random subset of them.
  std::vector<int> axes;
  Dims sq;
  bool all = rng.coin(0.3);
  for (int d = 0; d < r; ++d) {
    bool drop = s[d] == 1 && (all || rng.coin());
    if (drop && !all) axes.push_back(rng.coin() ? d - r : d);
    if (!drop) sq.push_back(s[d]);
  }
  if (!all && axes.empty()) {  // nothing picked: squeeze all extent-1 axes
    all = true;
    sq.clear();
    for (int64_t d : s)
      if (d != 1) sq.push_back(d);
  }
  SCOPED_TRACE("squeeze(" + x.how + (all ? ", all)" : ")"));
  Tensor y = all ? kiln::squeeze(x.t) : kiln::squeeze(x.t, axes);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, Ref(sq, x.r.v), {}));
  // unsqueeze at every legal position, negative too.
  for (int a = -r - 1; a <= r; ++a) {
    Dims us = s;
    us.insert(us.begin() + (a < 0 ? a + r + 1 : a), 1);
    EXPECT_TRUE(near(kiln::unsqueeze(x.t, a), Ref(us, x.r.v), {})) << "unsqueeze axis " << a;
  }
}

TEST(OpsShape, SqueezeUnsqueezeEveryDType) {
  Rng rng(kSeed + 54);
  for (DType t : kAllTypes)
    for (int it = 0; it < 10; ++it) checkSqueezeOnce(rng, t);
}

void checkSliceOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 7, 0.05);
  int r = static_cast<int>(s.size());
  Input x = makeInput(rng, s, t);
  int axis = static_cast<int>(rng.randint(-r, r - 1));
  int64_t n = s[normAxis(axis, r)];
  int64_t start = rng.randint(-n - 3, n + 3), stop = rng.randint(-n - 3, n + 3), step = rng.randint(1, 4);
  if (rng.coin(0.1)) stop = INT64_MAX;
  if (rng.coin(0.1)) start = INT64_MIN;
  SCOPED_TRACE("slice(" + x.how + ", axis " + std::to_string(axis) + ", " + std::to_string(start) + ":" +
               std::to_string(stop) + ":" + std::to_string(step) + ")");
  Tensor y = kiln::slice(x.t, axis, start, stop, step);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, sliceRef(x.r, axis, std::max<int64_t>(start, -(int64_t{1} << 40)), stop, step), {}));
}

TEST(OpsShape, SlicePythonSemanticsEveryDType) {
  Rng rng(kSeed + 55);
  for (DType t : kAllTypes)
    for (int it = 0; it < 25; ++it) checkSliceOnce(rng, t);
}

/// Python's x[start:stop:step] for step < 0: bounds count from the end and
/// clamp to [-1, n - 1] (INT64_MIN is Python's omitted stop).
Ref reversedSliceRef(const Ref& a, int axis, int64_t start, int64_t stop, int64_t step) {
  axis = normAxis(axis, a.rank());
  const int64_t n = a.shape[axis];
  auto bound = [n](int64_t b) { return std::clamp<int64_t>(b < 0 ? b + n : b, -1, n - 1); };
  const int64_t s0 = bound(start), s1 = bound(stop);
  const int64_t cnt = s0 > s1 ? (s0 - s1 - 1) / -step + 1 : 0;
  Dims s = a.shape;
  s[axis] = cnt;
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims idx = unravel(i, s);
    idx[axis] = s0 + idx[axis] * step;
    out.v[i] = a.at(idx);
  }
  return out;
}

TEST(OpsShape, NegativeStepSlicesEveryDType) {
  Rng rng(kSeed + 56);
  for (DType t : kAllTypes) {
    for (int it = 0; it < 20; ++it) {
      Dims s = randomShape(rng, 1, 4, 7, 0.05);
      int r = static_cast<int>(s.size());
      Input x = makeInput(rng, s, t);
      int axis = static_cast<int>(rng.randint(-r, r - 1));
      int64_t n = s[normAxis(axis, r)];
      int64_t start = rng.randint(-n - 3, n + 3), stop = rng.randint(-n - 3, n + 3), step = -rng.randint(1, 4);
      if (rng.coin(0.2)) stop = INT64_MIN;
      if (rng.coin(0.1)) start = INT64_MAX;
      SCOPED_TRACE("slice(" + x.how + ", axis " + std::to_string(axis) + ", " + std::to_string(start) + ":" +
                   std::to_string(stop) + ":" + std::to_string(step) + ")");
      Tensor y = kiln::slice(x.t, axis, start, stop, step);
      EXPECT_DTYPE(y, t);
      EXPECT_TRUE(near(y, reversedSliceRef(x.r, axis, start, stop, step), {}));
    }
  }
}

TEST(OpsShape, FlipAndNegativeStepExplicit) {
  Tensor x = kiln::arange(10);
  auto vals = [](const Tensor& t) { return t.to_vector<int64_t>(); };
  EXPECT_EQ(vals(kiln::slice(x, 0, -1, INT64_MIN, -1)), (std::vector<int64_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(kiln::slice(x, 0, 7, 2, -2)), (std::vector<int64_t>{7, 5, 3}));
  EXPECT_EQ(vals(kiln::slice(x, 0, 100, -100, -4)), (std::vector<int64_t>{9, 5, 1}));
  EXPECT_EQ(vals(kiln::slice(x, 0, 2, 5, -1)), (std::vector<int64_t>{}));
  EXPECT_EQ(vals(kiln::slice(x, 0, 3, 2, -1)), (std::vector<int64_t>{3}));
  Tensor m = kiln::reshape(kiln::arange(6), {2, 3});
  EXPECT_EQ(vals(kiln::flip(m, {1})), (std::vector<int64_t>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(vals(kiln::flip(m, {0, -1})), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(kiln::flip(m, {})), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  expectKilnError([&] { return kiln::flip(m, {1, -1}); }, "flip");
  expectKilnError([&] { return kiln::flip(m, {2}); }, "flip");
}

TEST(OpsShape, SliceExplicit) {
  Tensor x = kiln::arange(10);
  auto vals = [](const Tensor& t) { return t.to_vector<int64_t>(); };
  EXPECT_EQ(vals(kiln::slice(x, 0, 2, 8, 3)), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(vals(kiln::slice(x, 0, -3, 100)), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(vals(kiln::slice(x, 0, -100, 2)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(vals(kiln::slice(x, -1, 5, 2)), (std::vector<int64_t>{}));
  EXPECT_EQ(vals(kiln::slice(x, 0, 1, -1, 4)), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(kiln::slice(x, 0, 12, 20).numel(), 0);
  // Slices of slices.
  Tensor s = kiln::slice(kiln::slice(x, 0, 1, 10, 2), 0, 1, 4, 2);  // 1 3 5 7 9 -> 3 7
  EXPECT_EQ(vals(s), (std::vector<int64_t>{3, 7}));
}

void checkConcatOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 4, 0.05);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(-r, r - 1));
  int pieces = static_cast<int>(rng.randint(1, 4));
  std::vector<Tensor> xs;
  std::vector<Ref> refs;
  std::string how;
  for (int i = 0; i < pieces; ++i) {
    Dims ps = s;
    ps[normAxis(axis, r)] = rng.randint(0, 4);
    Input in = makeInput(rng, ps, t);
    xs.push_back(in.t);
    refs.push_back(in.r);
    how += in.how + "; ";
  }
  SCOPED_TRACE("concat(" + how + "axis " + std::to_string(axis) + ")");
  Tensor y = kiln::concat(xs, axis);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, concatRef(refs, axis), {}));
}

TEST(OpsShape, ConcatEveryDType) {
  Rng rng(kSeed + 56);
  for (DType t : kAllTypes)
    for (int it = 0; it < 15; ++it) checkConcatOnce(rng, t);
}

TEST(OpsShape, ChainedViewsThenCompute) {
  Rng rng(kSeed + 57);
  for (int it = 0; it < 30; ++it) {
    DType t = rng.pick(kNumericTypes);
    Dims s = randomShape(rng, 2, 4, 5);
    Input x = makeInput(rng, s, t, smallRange(t));
    int r = static_cast<int>(s.size());
    std::vector<int> perm(r);
    std::iota(perm.begin(), perm.end(), 0);
    std::reverse(perm.begin(), perm.end());
    Tensor v = kiln::permute(x.t, perm);
    Ref vr = permuteRef(x.r, perm);
    v = kiln::slice(v, 0, 1, 100, 2);
    vr = sliceRef(vr, 0, 1, 100, 2);
    v = kiln::unsqueeze(v, 1);
    vr.shape.insert(vr.shape.begin() + 1, 1);
    Dims bs = vr.shape;
    bs[1] = 3;
    v = kiln::broadcast_to(v, toShape(bs));
    vr = broadcastRef(vr, bs);
    v = kiln::transpose(v, 0, 1);
    vr = transposeRef(vr, 0, 1);
    SCOPED_TRACE(x.how + " -> chain " + str(vr.shape));
    EXPECT_TRUE(near(v, vr, {}));
    Tensor c = v.contiguous();
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_TRUE(near(c, vr, {}));
    Tensor sum = kiln::add(v, v);
    Ref sr = mapRef(vr, [t](double e) { return castTo(e + e, t); });
    EXPECT_TRUE(near(sum, sr, tolFor(t)));
    Tensor flat = kiln::reshape(v, {-1});
    EXPECT_TRUE(near(flat, Ref({vr.numel()}, vr.v), {}));
  }
}

TEST(OpsShape, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 600 + tid);
    for (int it = 0; it < 30; ++it) {
      DType t = rng.pick(kAllTypes);
      switch (rng.randint(0, 6)) {
        case 0: checkReshapeOnce(rng, t); break;
        case 1: checkTransposeOnce(rng, t); break;
        case 2: checkPermuteOnce(rng, t); break;
        case 3: checkBroadcastOnce(rng, t); break;
        case 4: checkSqueezeOnce(rng, t); break;
        case 5: checkSliceOnce(rng, t); break;
        default: checkConcatOnce(rng, t); break;
      }
    }
  });
}

// data() of a strided view gives a dense row-major copy and leaves the view
// as it was: it replaced the view, under a lock only data() took, while
// other threads read it (here: ops on the same transpose).
TEST(OpsShape, DataOfAStridedViewKeepsTheView) {
  Tensor base = kiln::arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3});
  Tensor t = kiln::transpose(base);
  if (t.device().kind != kiln::Device::CPU) GTEST_SKIP() << "data() is for host tensors";
  t.to_vector<float>();  // materialized: a strided view of base's buffer
  ASSERT_FALSE(t.is_contiguous());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      while (!stop.load()) {
        if (kiln::sum(kiln::mul(t, 2.0f)).item<float>() != 30.0f) ++wrong;
      }
    });
  const float* p = static_cast<const float*>(t.data());
  std::vector<float> dense(p, p + 6);
  EXPECT_EQ(dense, (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.data(), static_cast<const void*>(p));  // made once
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_FALSE(t.is_contiguous());  // still the view of base
  EXPECT_EQ(t.to_vector<float>(), dense);
}

TEST(OpsShape, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor pending = kiln::transpose(x * 2.0);
  expectKilnError([&] { return kiln::reshape(x, {4, 2}); }, "reshape");
  expectKilnError([&] { return kiln::reshape(x, {-1, -1}); }, "reshape");
  expectKilnError([&] { return kiln::reshape(x, {4, -1}); }, "reshape");
  expectKilnError([&] { return kiln::transpose(x, 0, 2); }, "transpose");
  expectKilnError([&] { return kiln::permute(x, {0, 0}); }, "permute");
  expectKilnError([&] { return kiln::permute(x, {0}); }, "permute");
  expectKilnError([&] { return kiln::broadcast_to(x, {2, 2}); }, "broadcast_to");
  expectKilnError([&] { return kiln::broadcast_to(x, {3}); }, "broadcast_to");
  expectKilnError([&] { return kiln::squeeze(x, {2}); }, "squeeze");
  expectKilnError([&] { return kiln::unsqueeze(x, 4); }, "unsqueeze");
  expectKilnError([&] { return kiln::slice(x, 1, 0, 2, 0); }, "slice");
  expectKilnError([&] { return kiln::slice(x, 1, 0, 2, INT64_MIN); }, "slice");
  expectKilnError([&] { return kiln::slice(x, 2, 0, 1); }, "slice");
  expectKilnError([&] { return kiln::concat({x, kiln::ones({2, 2})}, 0); }, "concat");
  expectKilnError([&] { return kiln::concat({x, kiln::ones({6})}, 0); }, "concat");
  expectKilnError([&] { return kiln::concat({}, 0); }, "concat");
  expectKilnError([&] { return kiln::concat({x, x}, 2); }, "concat");
  EXPECT_TRUE(near(pending, Ref({3, 2}, {2, 8, 4, 10, 6, 12}), {}));
  EXPECT_TRUE(near(kiln::concat({x, x}, 1), Ref({2, 6}, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}), {}));
}

}  // namespace
}  // namespace kt
