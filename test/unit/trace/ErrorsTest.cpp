// Bad input: kiln::Error at the offending call, naming the op and the shapes,
// and nothing recorded or computed before is lost.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test/unit/trace/ExpectError.h"

namespace kiln {
namespace {

class ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    pending = a * 2.0f;  // recorded, not yet run
  }
  void expectIntact() {
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  }
  Tensor a, pending;
};

TEST_F(ErrorsTest, ShapeMismatch) {
  Tensor b = from_vector<float>({1, 2}, {2});
  expectError([&] { add(pending, b); }, {"add", "[2, 3]", "[2]", "broadcast"});
  expectError([&] { matmul(pending, pending); }, {"matmul", "[2, 3]", "transpose"});
  expectError([&] { reshape(pending, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"});
  expectIntact();
}

TEST_F(ErrorsTest, BadAxis) {
  expectError([&] { sum(pending, {2}); }, {"reduce_sum", "axis 2", "rank 2"});
  expectError([&] { softmax(pending, -3); }, {"softmax", "axis -3"});
  expectError([&] { permute(pending, {0, 0}); }, {"permute", "twice"});
  expectError([&] { argmax(pending, 5); }, {"argmax", "axis 5"});
  expectIntact();
}

TEST_F(ErrorsTest, UnsupportedDTypeCombination) {
  Tensor flags = pending > 3.0f;
  expectError([&] { sub(flags, flags); }, {"sub", "bool"});
  expectError([&] { neg(flags); }, {"neg", "bool"});
  expectError([&] { index_select(pending, 0, pending); }, {"index_select", "integer", "f32"});
  expectError([&] { rand({2}, 1, DType::i32); }, {"rand", "floating"});
  expectIntact();
}

TEST_F(ErrorsTest, OutOfRangeSliceAndGather) {
  expectError([&] { slice(pending, 0, 0, 2, 0); }, {"slice", "step"});
  Tensor idx = from_vector<int64_t>({0, 5}, {2});
  expectError([&] { index_select(pending, 1, idx); }, {"index_select", "index 5", "extent 3"});
  Tensor gidx = from_vector<int64_t>({0, 3}, {2, 1});
  expectError([&] { gather(pending, 1, gidx); }, {"gather", "index 3"});
  expectError([&] { one_hot(idx, 3); }, {"one_hot", "5"});
  expectIntact();
}

TEST_F(ErrorsTest, PendingIndexErrorsSurfaceWhenRead) {
  // The index is computed in the same trace, so it is checked when the trace
  // runs; only the tensors that depend on it fail.
  Tensor idx = cast(from_vector<float>({0, 7}, {2}) * 1.0f, DType::i64);
  Tensor picked = index_select(pending, 1, idx);
  Tensor other = pending + 1.0f;
  expectError([&] { picked.to_vector<float>(); }, {"index_select", "index 7"});
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  expectError([&] { picked + 1.0f; }, {"failed computation", "index 7"});
  expectIntact();
}

TEST_F(ErrorsTest, ReadingEmptyOrUndefinedTensors) {
  Tensor empty = zeros({0, 3});
  expectError([&] { empty.item<float>(); }, {"item", "[0, 3]"});
  expectError([&] { max(empty, {0}); }, {"reduce_max", "extent 0"});
  expectError([&] { argmax(empty, 0); }, {"argmax", "empty"});
  Tensor undefined;
  expectError([&] { undefined.shape(); }, {"undefined"});
  expectError([&] { exp(undefined); }, {"exp", "undefined"});
  expectError([&] { pending.item<float>(); }, {"item", "6 elements"});
  EXPECT_EQ(sum(empty, {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  expectIntact();
}

TEST_F(ErrorsTest, DevicesWithoutADriver) {
  expectError([&] { zeros({2}, DType::f32, Device{Device::CUDA, 0}); }, {"cuda:0", "driver"});
  expectError([&] { pending.to(Device{Device::LevelZero, 0}); }, {"level_zero:0"});
  expectIntact();
}

TEST_F(ErrorsTest, FromVectorSizeMismatch) {
  expectError([&] { from_vector<float>({1, 2, 3}, {2, 2}); }, {"from_vector", "3 values", "[2, 2]"});
  expectError([&] { concat({a, from_vector<float>({1}, {1})}, 0); }, {"concat", "rank"});
  expectIntact();
}

}  // namespace
}  // namespace kiln
