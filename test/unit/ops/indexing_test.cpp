// Indexing: index_select, gather, index_add, scatter_add, one_hot.
#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

const std::vector<DType> kIndexTypes = {DType::i64, DType::i32, DType::i8, DType::u8};

Ref indexSelectRef(const Ref& x, int axis, const Ref& idx) {
  axis = normAxis(axis, x.rank());
  Dims s(x.shape.begin(), x.shape.begin() + axis);
  s.insert(s.end(), idx.shape.begin(), idx.shape.end());
  s.insert(s.end(), x.shape.begin() + axis + 1, x.shape.end());
  Ref out(s);
  int ir = idx.rank();
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims o = unravel(i, s);
    Dims j(o.begin() + axis, o.begin() + axis + ir);
    Dims src(o.begin(), o.begin() + axis);
    src.push_back(static_cast<int64_t>(idx.at(j)));
    src.insert(src.end(), o.begin() + axis + ir, o.end());
    out.v[i] = x.at(src);
  }
  return out;
}

Ref gatherRef(const Ref& x, int axis, const Ref& idx) {
  axis = normAxis(axis, x.rank());
  Ref out(idx.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims o = unravel(i, idx.shape);
    o[axis] = static_cast<int64_t>(idx.v[i]);
    out.v[i] = x.at(o);
  }
  return out;
}

void checkIndexSelectOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 5, 0.05);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(0, r - 1));
  if (s[axis] == 0) s[axis] = 2;
  if (rng.coin(0.3)) axis -= r;
  Input x = makeInput(rng, s, t);
  Dims is = randomShape(rng, 0, 2, 4, 0.05);
  DType it = rng.pick(kIndexTypes);
  int64_t n = s[normAxis(axis, r)];
  Input idx = makeInput(rng, is, it, {0, static_cast<double>(std::min<int64_t>(n - 1, 127))});
  SCOPED_TRACE("index_select(" + x.how + ", " + std::to_string(axis) + ", " + idx.how + ")");
  Tensor y = kiln::index_select(x.t, axis, idx.t);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, indexSelectRef(x.r, axis, idx.r), {}));
}

TEST(OpsIndex, IndexSelectEveryDType) {
  Rng rng(kSeed + 60);
  for (DType t : kAllTypes)
    for (int it = 0; it < 20; ++it) checkIndexSelectOnce(rng, t);
}

void checkGatherOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 5, 0.05);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(0, r - 1));
  if (s[axis] == 0) s[axis] = 3;
  Dims is = s;
  is[axis] = rng.randint(0, 6);
  if (rng.coin(0.3)) axis -= r;
  Input x = makeInput(rng, s, t);
  int64_t n = s[normAxis(axis, r)];
  Input idx = makeInput(rng, is, rng.pick(kIndexTypes), {0, static_cast<double>(std::min<int64_t>(n - 1, 127))});
  SCOPED_TRACE("gather(" + x.how + ", " + std::to_string(axis) + ", " + idx.how + ")");
  Tensor y = kiln::gather(x.t, axis, idx.t);
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, gatherRef(x.r, axis, idx.r), {}));
}

TEST(OpsIndex, GatherEveryDType) {
  Rng rng(kSeed + 61);
  for (DType t : kAllTypes)
    for (int it = 0; it < 20; ++it) checkGatherOnce(rng, t);
}

/// x with source's slices added at idx along axis, in index order (in
/// double: the inputs are small integers, exact in every dtype and sum).
Ref indexAddRef(const Ref& x, int axis, const Ref& idx, const Ref& source) {
  axis = normAxis(axis, x.rank());
  Ref out = x;
  for (int64_t i = 0; i < source.numel(); ++i) {
    Dims at = unravel(i, source.shape);
    at[axis] = static_cast<int64_t>(idx.v[at[axis]]);
    int64_t flat = 0;
    for (int d = 0; d < x.rank(); ++d) flat = flat * x.shape[d] + at[d];
    out.v[flat] += source.v[i];
  }
  return out;
}

void checkIndexAddOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 5, 0.05);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(0, r - 1));
  if (s[axis] == 0) s[axis] = 3;
  const int64_t extent = s[axis];
  if (rng.coin(0.3)) axis -= r;
  // Duplicates likely: more indices than rows, now and then none.
  const int64_t n = rng.coin(0.1) ? 0 : rng.randint(1, 7);
  Dims ss = s;
  ss[normAxis(axis, r)] = n;
  const Range small{-4, 4, 1};
  Input x = makeInput(rng, s, t, t == DType::u8 ? Range{0, 4, 1} : small);
  Input src = makeInput(rng, ss, t, t == DType::u8 ? Range{0, 4, 1} : small);
  Input idx = makeInput(rng, {n}, rng.pick(kIndexTypes), {0, static_cast<double>(std::min<int64_t>(extent - 1, 127))});
  SCOPED_TRACE("index_add(" + x.how + ", " + std::to_string(axis) + ", " + idx.how + ", " + src.how + ")");
  Tensor y = kiln::index_add(x.t, axis, idx.t, src.t);
  EXPECT_DTYPE(y, t);
  EXPECT_EQ(y.shape(), x.t.shape());
  EXPECT_TRUE(near(y, indexAddRef(x.r, axis, idx.r, src.r), {}));
}

TEST(OpsIndex, IndexAddEveryNumericDType) {
  Rng rng(kSeed + 63);
  for (DType t : kNumericTypes)
    for (int it = 0; it < 20; ++it) checkIndexAddOnce(rng, t);
}

TEST(OpsIndex, IndexAddExplicit) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor i = kiln::from_vector(std::vector<int64_t>{2, 0, 2}, {3});
  Tensor src = kiln::from_vector(std::vector<float>{10, 20, 30, 40, 50, 60}, {3, 2});
  // Row 2 gets rows 0 and 2 of src, row 0 gets row 1, row 1 keeps x's.
  EXPECT_TRUE(near(kiln::index_add(x, 0, i, src), Ref({3, 2}, {31, 42, 3, 4, 65, 86}), {}));
  // Along the last axis (negative), the source transposed.
  Tensor cols = kiln::from_vector(std::vector<int64_t>{1, 1}, {2});
  Tensor srcT = kiln::transpose(kiln::from_vector(std::vector<float>{7, 8, 9, 1, 2, 3}, {2, 3}), 0, 1);  // [3, 2]
  EXPECT_TRUE(near(kiln::index_add(x, -1, cols, srcT), Ref({3, 2}, {1, 2 + 7 + 1, 3, 4 + 8 + 2, 5, 6 + 9 + 3}), {}));
  // -0 where no index lands keeps its sign; NaN and inf in a row land only there.
  Tensor z = kiln::from_vector(std::vector<float>{-0.0f, -0.0f, 0, 0}, {2, 2});
  Tensor bad = kiln::from_vector(std::vector<float>{NAN, INFINITY}, {1, 2});
  std::vector<float> out = kiln::index_add(z, 0, kiln::from_vector(std::vector<int64_t>{1}, {1}), bad).to_vector<float>();
  EXPECT_TRUE(std::signbit(out[0]) && std::signbit(out[1]));
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], INFINITY);
  // No index: x itself.
  Tensor none = kiln::from_vector(std::vector<int64_t>{}, {0});
  EXPECT_TRUE(near(kiln::index_add(x, 0, none, kiln::zeros({0, 2})), Ref({3, 2}, {1, 2, 3, 4, 5, 6}), {}));
  // Integers wrap, as their adds do.
  Tensor u = kiln::from_vector(std::vector<uint8_t>{250}, {1});
  EXPECT_TRUE(near(kiln::index_add(u, 0, kiln::from_vector(std::vector<int64_t>{0, 0}, {2}),
                                   kiln::from_vector(std::vector<uint8_t>{3, 4}, {2})),
                   Ref({1}, {1}), {}));
}

/// x with each element of source added where idx names it along axis, in
/// row-major order of idx (in double: small integers, exact).
Ref scatterAddRef(const Ref& x, int axis, const Ref& idx, const Ref& source) {
  axis = normAxis(axis, x.rank());
  Ref out = x;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    Dims at = unravel(i, idx.shape);
    at[axis] = static_cast<int64_t>(idx.v[i]);
    int64_t flat = 0;
    for (int d = 0; d < x.rank(); ++d) flat = flat * x.shape[d] + at[d];
    out.v[flat] += source.v[i];
  }
  return out;
}

void checkScatterAddOnce(Rng& rng, DType t) {
  Dims s = randomShape(rng, 1, 4, 5, 0.05);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(0, r - 1));
  if (s[axis] == 0) s[axis] = 3;
  const int64_t extent = s[axis];
  // Index: at most x's extents off the axis, any number along it (duplicate
  // positions likely), now and then none.
  Dims is = s;
  for (int d = 0; d < r; ++d)
    if (d != axis) is[d] = rng.randint(0, s[d]);
  is[axis] = rng.coin(0.1) ? 0 : rng.randint(1, 7);
  if (rng.coin(0.3)) axis -= r;
  const Range small{-4, 4, 1};
  Input x = makeInput(rng, s, t, t == DType::u8 ? Range{0, 4, 1} : small);
  Input src = makeInput(rng, is, t, t == DType::u8 ? Range{0, 4, 1} : small);
  Input idx = makeInput(rng, is, rng.pick(kIndexTypes), {0, static_cast<double>(std::min<int64_t>(extent - 1, 127))});
  SCOPED_TRACE("scatter_add(" + x.how + ", " + std::to_string(axis) + ", " + idx.how + ", " + src.how + ")");
  Tensor y = kiln::scatter_add(x.t, axis, idx.t, src.t);
  EXPECT_DTYPE(y, t);
  EXPECT_EQ(y.shape(), x.t.shape());
  EXPECT_TRUE(near(y, scatterAddRef(x.r, axis, idx.r, src.r), {}));
}

TEST(OpsIndex, ScatterAddEveryNumericDType) {
  Rng rng(kSeed + 64);
  for (DType t : kNumericTypes)
    for (int it = 0; it < 20; ++it) checkScatterAddOnce(rng, t);
}

TEST(OpsIndex, ScatterAddExplicit) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor i = kiln::from_vector(std::vector<int64_t>{2, 2, 0, 1}, {2, 2});
  Tensor src = kiln::from_vector(std::vector<float>{10, 20, 30, 40}, {2, 2});
  // Row 0: column 2 gets 10 and 20; row 1: columns 0 and 1 get 30 and 40.
  EXPECT_TRUE(near(kiln::scatter_add(x, 1, i, src), Ref({2, 3}, {1, 2, 33, 34, 45, 6}), {}));
  // Along axis 0 with an index smaller than x off the axis; source
  // transposed (strided).
  Tensor rows = kiln::from_vector(std::vector<int64_t>{1, 1}, {1, 2});
  Tensor srcT = kiln::transpose(kiln::from_vector(std::vector<float>{7, 8}, {2, 1}), 0, 1);  // [1, 2]
  EXPECT_TRUE(near(kiln::scatter_add(x, -2, rows, srcT), Ref({2, 3}, {1, 2, 3, 4 + 7, 5 + 8, 6}), {}));
  // gather's reverse: scattering what gather read adds it back in place.
  Tensor back = kiln::scatter_add(kiln::zeros({2, 3}), 1, i, kiln::gather(x, 1, i));
  EXPECT_TRUE(near(back, Ref({2, 3}, {0, 0, 6, 4, 5, 0}), {}));
  // -0 where no index lands keeps its sign; NaN and inf land only there.
  Tensor z = kiln::from_vector(std::vector<float>{-0.0f, -0.0f, 0, 0}, {2, 2});
  Tensor bad = kiln::from_vector(std::vector<float>{NAN, INFINITY}, {1, 2});
  std::vector<float> out =
      kiln::scatter_add(z, 0, kiln::from_vector(std::vector<int64_t>{1, 1}, {1, 2}), bad).to_vector<float>();
  EXPECT_TRUE(std::signbit(out[0]) && std::signbit(out[1]));
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], INFINITY);
  // No index: x itself. Integers wrap.
  EXPECT_TRUE(near(kiln::scatter_add(x, 0, kiln::zeros({0, 3}, DType::i64), kiln::zeros({0, 3})),
                   Ref({2, 3}, {1, 2, 3, 4, 5, 6}), {}));
  Tensor u = kiln::from_vector(std::vector<uint8_t>{250}, {1});
  EXPECT_TRUE(near(kiln::scatter_add(u, 0, kiln::from_vector(std::vector<int64_t>{0, 0}, {2}),
                                     kiln::from_vector(std::vector<uint8_t>{3, 4}, {2})),
                   Ref({1}, {1}), {}));
}

TEST(OpsIndex, ScatterAddBadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor i = kiln::from_vector(std::vector<int64_t>{1, 0}, {2, 1});
  Tensor src = kiln::ones({2, 1});
  Tensor pending = kiln::scatter_add(x, 1, i, src);
  expectKilnError([&] { return kiln::scatter_add(x, 1, kiln::from_vector(std::vector<int64_t>{3}, {1, 1}), kiln::ones({1, 1})); },
                  "out of range");
  expectKilnError([&] { return kiln::scatter_add(x, 1, i, kiln::ones({2, 2})); }, "index's shape");
  expectKilnError([&] { return kiln::scatter_add(x, 1, kiln::reshape(i, {2}), kiln::ones({2})); }, "rank");
  expectKilnError([&] { return kiln::scatter_add(x, 1, kiln::zeros({3, 1}, DType::i64), kiln::ones({3, 1})); },
                  "larger");
  expectKilnError([&] { return kiln::scatter_add(x, 1, i, kiln::ones({2, 1}, DType::f64)); }, "cast source");
  expectKilnError([&] { return kiln::scatter_add(x, 2, i, src); }, "out of range for rank");
  expectKilnError([&] { return kiln::scatter_add(kiln::cast(x, DType::boolean), 1, i, kiln::cast(src, DType::boolean)); },
                  "not bool");
  expectKilnError([&] { return kiln::scatter_add(x, 1, kiln::from_vector(std::vector<float>{0, 0}, {2, 1}), src); },
                  "integer");
  EXPECT_TRUE(near(pending, Ref({2, 3}, {0, 2, 2, 11, 11, 12}), {}));
}

TEST(OpsIndex, IndexAddBadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor i = kiln::from_vector(std::vector<int64_t>{1, 0}, {2});
  Tensor src = kiln::ones({2, 3});
  Tensor pending = kiln::index_add(x, 0, i, src);
  expectKilnError([&] { return kiln::index_add(x, 0, kiln::from_vector(std::vector<int64_t>{2}, {1}), kiln::ones({1, 3})); },
                  "out of range");
  expectKilnError([&] { return kiln::index_add(x, 0, i, kiln::ones({3, 3})); }, "source");
  expectKilnError([&] { return kiln::index_add(x, 0, kiln::reshape(i, {1, 2}), src); }, "1-D");
  expectKilnError([&] { return kiln::index_add(x, 0, i, kiln::ones({2, 3}, DType::f64)); }, "cast source");
  expectKilnError([&] { return kiln::index_add(x, 2, i, src); }, "index_add");
  expectKilnError([&] { return kiln::index_add(kiln::cast(x, DType::boolean), 0, i, kiln::cast(src, DType::boolean)); },
                  "not bool");
  expectKilnError([&] { return kiln::index_add(x, 0, kiln::from_vector(std::vector<float>{0}, {1}), kiln::ones({1, 3})); },
                  "integer");
  EXPECT_TRUE(near(pending, Ref({2, 3}, {1, 2, 3, 11, 12, 13}), {}));
}

void checkOneHotOnce(Rng& rng, DType t) {
  Dims is = randomShape(rng, 0, 3, 5, 0.05);
  int64_t c = rng.randint(1, 7);
  DType it = rng.pick(kIndexTypes);
  Input idx = makeInput(rng, is, it, {0, static_cast<double>(c - 1)});
  SCOPED_TRACE("one_hot(" + idx.how + ", " + std::to_string(c) + ", " + tname(t) + ")");
  Tensor y = kiln::one_hot(idx.t, c, t);
  EXPECT_DTYPE(y, t);
  Dims s = is;
  s.push_back(c);
  Ref ref(s);
  for (int64_t i = 0; i < ref.numel(); ++i) ref.v[i] = idx.r.v[i / c] == static_cast<double>(i % c) ? 1 : 0;
  EXPECT_TRUE(near(y, ref, {}));
}

TEST(OpsIndex, OneHotEveryDType) {
  Rng rng(kSeed + 62);
  for (DType t : kAllTypes)
    for (int it = 0; it < 10; ++it) checkOneHotOnce(rng, t);
  Tensor d = kiln::one_hot(kiln::from_vector(std::vector<int64_t>{2, 0}, {2}), 3);
  EXPECT_DTYPE(d, DType::f32);
  EXPECT_TRUE(near(d, Ref({2, 3}, {0, 0, 1, 1, 0, 0}), {}));
}

TEST(OpsIndex, Explicit) {
  Tensor x = kiln::from_vector(std::vector<float>{0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor i = kiln::from_vector(std::vector<int64_t>{2, 0, 2}, {3});
  EXPECT_TRUE(near(kiln::index_select(x, 1, i), Ref({2, 3}, {2, 0, 2, 12, 10, 12}), {}));
  EXPECT_TRUE(near(kiln::index_select(x, 0, kiln::scalar_tensor(int64_t{1}, DType::i64)), Ref({3}, {10, 11, 12}), {}));
  Tensor i2 = kiln::from_vector(std::vector<int32_t>{1, 1, 0, 1}, {2, 2});
  EXPECT_TRUE(near(kiln::index_select(x, 0, i2), Ref({2, 2, 3}, {10, 11, 12, 10, 11, 12, 0, 1, 2, 10, 11, 12}), {}));
  EXPECT_TRUE(near(kiln::index_select(x, 1, kiln::zeros({0}, DType::i64)), Ref({2, 0}), {}));
  Tensor g = kiln::from_vector(std::vector<int64_t>{0, 0, 2, 1}, {2, 2});
  EXPECT_TRUE(near(kiln::gather(x, 1, g), Ref({2, 2}, {0, 0, 12, 11}), {}));
  Tensor g0 = kiln::from_vector(std::vector<int64_t>{1, 0, 1}, {1, 3});
  EXPECT_TRUE(near(kiln::gather(x, 0, g0), Ref({1, 3}, {10, 1, 12}), {}));
  // On a pending, transposed input.
  Tensor xt = kiln::transpose(x * 2.0);  // [3, 2]
  EXPECT_TRUE(near(kiln::index_select(xt, 0, i), Ref({3, 2}, {4, 24, 0, 20, 4, 24}), {}));
}

TEST(OpsIndex, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 700 + tid);
    for (int it = 0; it < 30; ++it) {
      DType t = rng.pick(kAllTypes);
      switch (rng.randint(0, 2)) {
        case 0: checkIndexSelectOnce(rng, t); break;
        case 1: checkGatherOnce(rng, t); break;
        default: checkOneHotOnce(rng, t); break;
      }
    }
  });
}

TEST(OpsIndex, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor i = kiln::from_vector(std::vector<int64_t>{1, 0}, {2});
  Tensor pending = kiln::index_select(x, 1, i);
  Tensor fidx = kiln::from_vector(std::vector<float>{0, 1}, {2});
  expectKilnError([&] { return kiln::index_select(x, 1, fidx); }, "index_select");
  expectKilnError([&] { return kiln::index_select(x, 2, i); }, "index_select");
  expectKilnError([&] { return kiln::gather(x, 1, i); }, "gather");  // rank mismatch
  expectKilnError([&] { return kiln::gather(x, 1, kiln::reshape(fidx, {1, 2})); }, "gather");
  expectKilnError([&] { return kiln::one_hot(fidx, 3); }, "one_hot");
  EXPECT_TRUE(near(pending, Ref({2, 2}, {1, 0, 11, 10}), {}));
  EXPECT_TRUE(near(kiln::one_hot(i, 2, DType::i32), Ref({2, 2}, {0, 1, 1, 0}), {}));
}

}  // namespace
}  // namespace kt
