// Checked element counts, byte sizes and strided extents, and the shape
// rules that must not overflow on their way to a result (issue 21, defect 1).
#include "runtime/core/TensorSize.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/error.h"
#include "runtime/core/ShapeRules.h"

namespace kiln::core {
namespace {

constexpr int64_t k2(int n) { return int64_t{1} << n; }

void expectMentions(const std::string& message, std::initializer_list<const char*> needles) {
  EXPECT_FALSE(message.empty());
  for (const char* n : needles) EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' missing in: " << message;
}

TEST(TensorSize, ElementCountsThatFitPass) {
  EXPECT_EQ(checkElementCount(Shape{}), "");
  EXPECT_EQ(checkElementCount(Shape{0}), "");
  EXPECT_EQ(checkElementCount(Shape{k2(31), k2(31)}), "");
  EXPECT_EQ(checkElementCount(Shape{INT64_MAX}), "");
  EXPECT_EQ(checkElementCount(Shape{0, k2(31), k2(31)}), "");
}

TEST(TensorSize, ElementCountsThatOverflowAreNamed) {
  expectMentions(checkElementCount(Shape{k2(40), k2(40)}),
                 {"[1099511627776, 1099511627776]", "too many elements", "1.209e+24", "int64"});
  expectMentions(checkElementCount(Shape{k2(32), k2(32)}), {"too many elements", "int64"});
  expectMentions(checkElementCount(Shape{2, 2, 2, 2, 2, 2, 2, k2(57)}), {"too many elements"});
  // Empty, but its row-major strides would overflow.
  expectMentions(checkElementCount(Shape{0, k2(40), k2(40)}), {"empty", "strides"});
}

TEST(TensorSize, DenseBytesAreCheckedAgainstTheAddressSpace) {
  int64_t bytes = -1;
  EXPECT_EQ(denseByteSize(Shape{2, 3}, DType::f64, &bytes), "");
  EXPECT_EQ(bytes, 48);
  EXPECT_EQ(denseByteSize(Shape{k2(59)}, DType::f64, &bytes), "");
  EXPECT_EQ(bytes, k2(62));
  // 2^61 f64 is 2^64 bytes: wraps to 0 in size_t.
  expectMentions(denseByteSize(Shape{k2(61)}, DType::f64, &bytes),
                 {"[2305843009213693952]", "f64", "18446744073709551616 bytes", "address space"});
  expectMentions(denseByteSize(Shape{k2(31), k2(31)}, DType::f32, &bytes), {"18446744073709551616 bytes"});
  EXPECT_EQ(denseByteSize(Shape{k2(31), k2(31)}, DType::u8, &bytes), "");
  try {
    requireDenseBytes("myop", Shape{k2(61)}, DType::f64);
    FAIL() << "no error";
  } catch (const Error& e) {
    expectMentions(e.what(), {"myop: ", "address space"});
  }
  EXPECT_THROW(requireElementCount("myop", Shape{k2(40), k2(40)}), Error);
  EXPECT_NO_THROW(requireElementCount("myop", Shape{k2(40), k2(20)}));
}

TEST(TensorSize, StridedExtentsAreCheckedBothWays) {
  int64_t lo = 1, hi = 1;
  const int64_t dense[2] = {3, 1};
  EXPECT_EQ(stridedExtent(Shape{2, 3}, dense, DType::f32, &lo, &hi), "");
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 5);
  const int64_t negative[2] = {-3, 1};
  EXPECT_EQ(stridedExtent(Shape{2, 3}, negative, DType::f32, &lo, &hi), "");
  EXPECT_EQ(lo, -3);
  EXPECT_EQ(hi, 2);
  const int64_t any[2] = {INT64_MAX, INT64_MIN};
  EXPECT_EQ(stridedExtent(Shape{0, 3}, any, DType::f32, &lo, &hi), "");  // empty: touches nothing
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 0);
  const int64_t huge[2] = {k2(62), 1};
  expectMentions(stridedExtent(Shape{4, 4}, huge, DType::f32, &lo, &hi), {"strides", "address space"});
  const int64_t split[2] = {k2(62), -k2(62)};  // each span fits; the distance between them does not
  expectMentions(stridedExtent(Shape{2, 2}, split, DType::u8, &lo, &hi), {"address space"});
  const int64_t bytesOnly[1] = {k2(61)};  // 2^61 elements apart: fits as elements, not as f64 bytes
  EXPECT_EQ(stridedExtent(Shape{2}, bytesOnly, DType::u8, &lo, &hi), "");
  expectMentions(stridedExtent(Shape{2}, bytesOnly, DType::f64, &lo, &hi), {"address space"});
}

TEST(TensorSize, ShapeRulesRefuseResultsThatOverflow) {
  Shape out;
  expectMentions(broadcastShapes(Shape{k2(40), 1}, Shape{1, k2(40)}, &out), {"too many elements"});
  expectMentions(matmulShape(Shape{k2(40), 1}, Shape{1, k2(40)}, &out), {"too many elements"});
  // Reshaping an empty tensor: numel 0 == 0, but the extents wrap to 0.
  expectMentions(reshapeShape(Shape{0}, Shape{k2(32), k2(32)}, &out), {"cannot reshape", "too many elements"});
  expectMentions(reshapeShape(Shape{0}, Shape{0, k2(40), k2(40)}, &out), {"cannot reshape"});
  expectMentions(reshapeShape(Shape{0}, Shape{k2(40), k2(40), -1}, &out), {"cannot reshape"});
  EXPECT_EQ(reshapeShape(Shape{0, 4}, Shape{-1, 2}, &out), "");
  EXPECT_EQ(out, (Shape{0, 2}));
  const Shape a{k2(62)}, b{k2(62)};
  const Shape* both[] = {&a, &b};
  expectMentions(concatShape(both, 0, &out), {"int64"});
  const Shape c{2, k2(40)}, d{2, k2(40)};
  const Shape* wide[] = {&c, &d};
  EXPECT_EQ(concatShape(wide, 0, &out), "");
  expectMentions(indexSelectShape(Shape{2, k2(40)}, 0, Shape{k2(30)}, &out), {"too many elements"});
}

TEST(TensorSize, SlicesWithHugeStepsDoNotOverflow) {
  int64_t start = -1, extent = -1;
  EXPECT_EQ(normalizeSlice(10, 0, 10, INT64_MAX, &start, &extent), "");
  EXPECT_EQ(extent, 1);
  EXPECT_EQ(normalizeSlice(INT64_MAX, 1, INT64_MAX, INT64_MAX - 1, &start, &extent), "");
  EXPECT_EQ(extent, 1);
  EXPECT_EQ(normalizeSlice(10, 0, 10, 3, &start, &extent), "");
  EXPECT_EQ(extent, 4);
  const int64_t starts[1] = {1}, steps[1] = {INT64_MAX};
  expectMentions(checkSlice(Shape{10}, starts, steps, Shape{2}), {"runs past"});
  EXPECT_EQ(checkSlice(Shape{10}, starts, steps, Shape{1}), "");
}

}  // namespace
}  // namespace kiln::core
