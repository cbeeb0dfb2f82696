#include "runtime/core/ShapeRules.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln::core {
namespace {

TEST(ShapeRules, BroadcastAlignsAtTheRight) {
  Shape out;
  EXPECT_EQ(broadcastShapes(Shape{2, 1, 4}, Shape{3, 1}, &out), "");
  EXPECT_EQ(out, (Shape{2, 3, 4}));
  EXPECT_EQ(broadcastShapes(Shape{}, Shape{5}, &out), "");
  EXPECT_EQ(out, (Shape{5}));
  EXPECT_EQ(broadcastShapes(Shape{0, 3}, Shape{1, 3}, &out), "");
  EXPECT_EQ(out, (Shape{0, 3}));
  std::string e = broadcastShapes(Shape{2, 3}, Shape{4, 3}, &out);
  EXPECT_NE(e.find("do not broadcast"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
}

TEST(ShapeRules, ReduceShapeNormalizesAxes) {
  Shape out;
  AxisMask mask = 0;
  const int axes[] = {-1, 0};
  EXPECT_EQ(reduceShape(Shape{2, 3, 4}, axes, false, &out, &mask), "");
  EXPECT_EQ(out, (Shape{3}));
  EXPECT_EQ(mask, 0b101u);
  EXPECT_EQ(reduceShape(Shape{2, 3, 4}, axes, true, &out, &mask), "");
  EXPECT_EQ(out, (Shape{1, 3, 1}));
  EXPECT_EQ(reduceShape(Shape{2, 3}, {}, false, &out, &mask), "");
  EXPECT_EQ(out, Shape{});
  const int dup[] = {1, -1};
  EXPECT_NE(reduceShape(Shape{2, 3}, dup, false, &out, &mask), "");
  const int bad[] = {2};
  EXPECT_NE(reduceShape(Shape{2, 3}, bad, false, &out, &mask).find("out of range"), std::string::npos);
}

TEST(ShapeRules, MatmulBroadcastsBatchDims) {
  Shape out;
  EXPECT_EQ(matmulShape(Shape{5, 1, 2, 3}, Shape{4, 3, 7}, &out), "");
  EXPECT_EQ(out, (Shape{5, 4, 2, 7}));
  EXPECT_NE(matmulShape(Shape{2, 3}, Shape{4, 5}, &out).find("inner extents differ"), std::string::npos);
  EXPECT_NE(matmulShape(Shape{3}, Shape{3, 5}, &out), "");
}

TEST(ShapeRules, ReshapeInfersOneExtent) {
  Shape out;
  EXPECT_EQ(reshapeShape(Shape{4, 6}, Shape{-1, 8}, &out), "");
  EXPECT_EQ(out, (Shape{3, 8}));
  EXPECT_NE(reshapeShape(Shape{4, 6}, Shape{-1, 5}, &out), "");
  EXPECT_NE(reshapeShape(Shape{4, 6}, Shape{-1, -1}, &out), "");
  EXPECT_NE(reshapeShape(Shape{4, 6}, Shape{5, 5}, &out), "");
  EXPECT_EQ(reshapeShape(Shape{0, 6}, Shape{3, 0}, &out), "");
}

TEST(ShapeRules, SliceIsPythonLike) {
  int64_t start, extent;
  EXPECT_EQ(normalizeSlice(10, -3, 100, 1, &start, &extent), "");
  EXPECT_EQ(start, 7);
  EXPECT_EQ(extent, 3);
  EXPECT_EQ(normalizeSlice(10, 1, 8, 3, &start, &extent), "");
  EXPECT_EQ(extent, 3);  // 1, 4, 7
  EXPECT_EQ(normalizeSlice(10, 8, 2, 1, &start, &extent), "");
  EXPECT_EQ(extent, 0);
  EXPECT_NE(normalizeSlice(10, 0, 5, 0, &start, &extent), "");
  const int64_t starts[] = {1, 0}, steps[] = {2, 1};
  EXPECT_EQ(checkSlice(Shape{5, 3}, starts, steps, Shape{2, 3}), "");
  EXPECT_NE(checkSlice(Shape{5, 3}, starts, steps, Shape{3, 3}), "");
}

TEST(ShapeRules, ConcatIndexSelectGather) {
  Shape a{2, 3}, b{4, 3}, out;
  const Shape* ins[] = {&a, &b};
  EXPECT_EQ(concatShape(ins, 0, &out), "");
  EXPECT_EQ(out, (Shape{6, 3}));
  EXPECT_NE(concatShape(ins, 1, &out), "");
  EXPECT_EQ(indexSelectShape(Shape{5, 7, 2}, 1, Shape{3, 4}, &out), "");
  EXPECT_EQ(out, (Shape{5, 3, 4, 2}));
  EXPECT_EQ(gatherShape(Shape{5, 7}, 1, Shape{5, 2}, &out), "");
  EXPECT_EQ(out, (Shape{5, 2}));
  EXPECT_NE(gatherShape(Shape{5, 7}, 1, Shape{6, 2}, &out), "");
  EXPECT_NE(gatherShape(Shape{5, 7}, 1, Shape{5}, &out), "");
}

TEST(ShapeRules, Conv2dShapeAndItsErrors) {
  Conv2dParams p;
  Shape out;
  EXPECT_EQ(conv2dShape(Shape{2, 3, 7, 6}, Shape{4, 3, 3, 3}, p, &out), "");
  EXPECT_EQ(out, (Shape{2, 4, 5, 4}));
  p.strideH = 2, p.padTop = 1, p.padBottom = 2, p.dilationW = 2, p.groups = 3;
  // H: (7 + 3 - 3) / 2 + 1 = 4; W: (6 - 5) / 1 + 1 = 2.
  EXPECT_EQ(conv2dShape(Shape{0, 6, 7, 6}, Shape{9, 2, 3, 3}, p, &out), "");
  EXPECT_EQ(out, (Shape{0, 9, 4, 2}));
  EXPECT_NE(conv2dShape(Shape{0, 6, 7, 6}, Shape{9, 3, 3, 3}, p, &out).find("C/groups"), std::string::npos);
  EXPECT_NE(conv2dShape(Shape{0, 6, 7, 6}, Shape{8, 2, 3, 3}, p, &out).find("must divide"), std::string::npos);
  EXPECT_NE(conv2dShape(Shape{1, 6, 7, 2}, Shape{9, 2, 3, 3}, p, &out).find("larger than the padded input"),
            std::string::npos);
  EXPECT_NE(conv2dShape(Shape{6, 7, 2}, Shape{9, 2, 3, 3}, p, &out).find("rank 4"), std::string::npos);
  Conv2dParams bad;
  bad.padRight = -1;
  EXPECT_NE(conv2dShape(Shape{1, 1, 3, 3}, Shape{1, 1, 1, 1}, bad, &out), "");
  bad = {};
  bad.dilationH = 0;
  EXPECT_NE(conv2dShape(Shape{1, 1, 3, 3}, Shape{1, 1, 1, 1}, bad, &out), "");
  // The attribute list round-trips.
  int64_t a[Conv2dParams::kAttrCount];
  p.toAttrs(a);
  Conv2dParams back = Conv2dParams::fromAttrs(a);
  EXPECT_EQ(back.strideH, 2);
  EXPECT_EQ(back.padBottom, 2);
  EXPECT_EQ(back.dilationW, 2);
  EXPECT_EQ(back.groups, 3);
}

TEST(ShapeRules, PoolExtentCeilModeAndSamePadding) {
  int64_t n = 0;
  EXPECT_EQ(poolExtent(5, 2, 2, 0, 0, 1, false, &n), "");
  EXPECT_EQ(n, 2);
  EXPECT_EQ(poolExtent(5, 2, 2, 0, 0, 1, true, &n), "");
  EXPECT_EQ(n, 3);
  EXPECT_EQ(poolExtent(5, 2, 2, 1, 1, 1, true, &n), "");  // the 4th window would start in the end padding
  EXPECT_EQ(n, 3);
  EXPECT_EQ(poolExtent(7, 3, 2, 0, 0, 2, false, &n), "");  // span 5
  EXPECT_EQ(n, 2);
  EXPECT_NE(poolExtent(3, 3, 1, 0, 0, 2, false, &n), "");
  EXPECT_NE(poolExtent(3, 0, 1, 0, 0, 1, false, &n), "");
  int64_t b = 0, e = 0;
  samePadding(7, 3, 2, 1, true, &b, &e);  // out 4: total (4-1)*2+3-7 = 2
  EXPECT_EQ(b, 1);
  EXPECT_EQ(e, 1);
  samePadding(6, 2, 1, 1, true, &b, &e);  // total 1: at the end
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 1);
  samePadding(6, 2, 1, 1, false, &b, &e);  // SAME_LOWER: at the start
  EXPECT_EQ(b, 1);
  EXPECT_EQ(e, 0);
}

TEST(ShapeRules, ResultTypeFollowsPyTorch) {
  using P = OperandPriority;
  auto rt = [](std::vector<TypedOperand> ops) { return resultType(ops); };
  EXPECT_EQ(rt({{DType::i32, P::Tensor}, {DType::f64, P::Scalar}}), DType::f32);
  EXPECT_EQ(rt({{DType::f16, P::Tensor}, {DType::f64, P::Scalar}}), DType::f16);
  EXPECT_EQ(rt({{DType::i8, P::Tensor}, {DType::i64, P::Scalar}}), DType::i8);
  EXPECT_EQ(rt({{DType::u8, P::Tensor}, {DType::i8, P::Tensor}}), DType::i32);
  EXPECT_EQ(rt({{DType::i32, P::Tensor}, {DType::f64, P::RankZero}}), DType::f64);
  EXPECT_EQ(rt({{DType::f32, P::Tensor}, {DType::f64, P::RankZero}}), DType::f32);
  EXPECT_EQ(rt({{DType::boolean, P::Tensor}, {DType::i64, P::Scalar}}), DType::i64);
  EXPECT_EQ(rt({{DType::f16, P::Tensor}, {DType::bf16, P::Tensor}}), DType::f32);
  EXPECT_EQ(rt({{DType::u8, P::Tensor}, {DType::i64, P::Tensor}}), DType::i64);
}

}  // namespace
}  // namespace kiln::core
