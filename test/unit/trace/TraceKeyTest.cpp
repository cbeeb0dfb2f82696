// TraceKey: equal for the same computation on new data, different whenever
// the computation differs.
#include "runtime/trace/TraceKey.h"

#include <gtest/gtest.h>

#include <functional>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"

namespace kiln {
namespace {

/// Runs `body` as one trace and returns its key.
trace::TraceKey keyOf(const std::function<void()>& body) {
  sync();
  body();
  sync();
  return exec::Engine::lastKey();
}

Tensor data(float seed, Shape s = {4, 3}) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = seed + static_cast<float>(i);
  return from_vector(v, s);
}

TEST(TraceKey, SameComputationNewDataIsEqual) {
  Tensor out;
  auto a = keyOf([&] { out = relu(matmul(data(1), transpose(data(2)))) + 1.0f; });
  auto b = keyOf([&] { out = relu(matmul(data(7), transpose(data(9)))) + 1.0f; });
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash, b.hash);
}

TEST(TraceKey, DiffersWhenTheComputationDiffers) {
  Tensor out, out2;
  auto base = keyOf([&] { out = sum(data(1) * 2.0f, {0}); });
  EXPECT_FALSE(base == keyOf([&] { out = sum(data(1) * 3.0f, {0}); }));            // attribute (constant)
  EXPECT_FALSE(base == keyOf([&] { out = sum(data(1) * 2.0f, {1}); }));            // axes
  EXPECT_FALSE(base == keyOf([&] { out = sum(data(1) * 2.0f, {0}, true); }));      // keepdim
  EXPECT_FALSE(base == keyOf([&] { out = sum(data(1, {5, 3}) * 2.0f, {0}); }));    // shape
  EXPECT_FALSE(base == keyOf([&] { out = sum(data(1) + 2.0f, {0}); }));            // op
  EXPECT_FALSE(base == keyOf([&] { out = sum(cast(data(1), DType::f64) * 2.0, {0}); }));  // dtype
}

TEST(TraceKey, DiffersInTheLiveSet) {
  Tensor a, b;
  auto one = keyOf([&] {
    Tensor x = data(1);
    a = exp(x);
    b = a * 2.0f;
  });
  auto two = keyOf([&] {
    Tensor x = data(1);
    Tensor tmp = exp(x);
    b = tmp * 2.0f;  // exp is not live this time
  });
  EXPECT_FALSE(one == two);
}

TEST(TraceKey, DiffersInParameterLayoutAndAliasing) {
  Tensor x = data(1, {3, 3}), y = data(2, {3, 3});
  Tensor xt = transpose(x);
  sync();
  Tensor out;
  auto plain = keyOf([&] { out = x + y; });
  auto strided = keyOf([&] { out = xt + y; });
  auto aliased = keyOf([&] { out = x + xt; });
  auto distinct = keyOf([&] { out = y + xt; });
  EXPECT_FALSE(plain == strided);
  EXPECT_FALSE(aliased == distinct);  // same layouts, but x and xt share memory
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {
TEST(TraceKey, StructureHashIgnoresSizesOnly) {
  Tensor out;
  auto small = keyOf([&] { out = relu(data(1, {4, 3}) * 2.0f); });
  auto large = keyOf([&] { out = relu(data(1, {9, 3}) * 2.0f); });
  auto other = keyOf([&] { out = relu(data(1, {9, 3}) * 3.0f); });
  EXPECT_FALSE(small == large);
  EXPECT_EQ(small.structureHash, large.structureHash);
  EXPECT_NE(large.structureHash, other.structureHash);
}
}  // namespace
}  // namespace kiln
