// A dynamic-shape GPU kernel's launch program (runtime/exec/LaunchProgram.h):
// each step computes as MLIR's arith operation of the same name does on
// int64 (the host's index arithmetic it was read from), a division by zero
// gives 0 instead of trapping, and the checker refuses steps that read
// later steps or sizes the kernel does not take.
#include <gtest/gtest.h>

#include <climits>
#include <vector>

#include "runtime/exec/LaunchProgram.h"

namespace kiln::exec {
namespace {

using Op = LaunchExpr::Op;

/// The value of `op` on `a` and `b` (and `c` for Select), as a program of
/// three constants and the step.
int64_t apply(Op op, int64_t a, int64_t b, int64_t c = 0) {
  const std::vector<LaunchExpr> program = {{Op::Constant, a}, {Op::Constant, b}, {Op::Constant, c}, {op, 0, 1, 2}};
  EXPECT_EQ(checkLaunchProgram(program, 1), "");
  std::vector<int64_t> values;
  const int64_t sizes[1] = {0};
  runLaunchProgram(program, sizes, values);
  return values.back();
}

TEST(LaunchProgram, StepsComputeAsTheArithOperations) {
  EXPECT_EQ(apply(Op::Add, 7, -9), -2);
  EXPECT_EQ(apply(Op::Sub, 7, -9), 16);
  EXPECT_EQ(apply(Op::Mul, -7, 9), -63);
  EXPECT_EQ(apply(Op::Add, INT64_MAX, 1), INT64_MIN);  // wraps, as index arithmetic does
  // arith.divsi truncates; floordivsi rounds down; ceildivsi rounds up.
  EXPECT_EQ(apply(Op::DivS, -7, 2), -3);
  EXPECT_EQ(apply(Op::FloorDivS, -7, 2), -4);
  EXPECT_EQ(apply(Op::FloorDivS, 7, -2), -4);
  EXPECT_EQ(apply(Op::FloorDivS, -8, 2), -4);
  EXPECT_EQ(apply(Op::CeilDivS, 7, 2), 4);
  EXPECT_EQ(apply(Op::CeilDivS, -7, 2), -3);
  EXPECT_EQ(apply(Op::CeilDivS, -7, -2), 4);
  EXPECT_EQ(apply(Op::CeilDivS, 8, 2), 4);
  EXPECT_EQ(apply(Op::RemS, -7, 2), -1);
  // Unsigned: byte counts (ceildivui of the scratch offsets).
  EXPECT_EQ(apply(Op::CeilDivU, 65, 64), 2);
  EXPECT_EQ(apply(Op::CeilDivU, 64, 64), 1);
  EXPECT_EQ(apply(Op::DivU, -1, 2), INT64_MAX);
  EXPECT_EQ(apply(Op::RemU, -1, 16), 15);
  EXPECT_EQ(apply(Op::MinS, -3, 2), -3);
  EXPECT_EQ(apply(Op::MaxS, -3, 2), 2);
  EXPECT_EQ(apply(Op::Lt, -3, 2), 1);
  EXPECT_EQ(apply(Op::Ge, -3, 2), 0);
  EXPECT_EQ(apply(Op::Eq, 5, 5), 1);
  EXPECT_EQ(apply(Op::Ne, 5, 5), 0);
  EXPECT_EQ(apply(Op::Le, 5, 5), 1);
  EXPECT_EQ(apply(Op::Gt, 5, 5), 0);
  EXPECT_EQ(apply(Op::Select, 1, 10, 20), 10);
  EXPECT_EQ(apply(Op::Select, 0, 10, 20), 20);
}

TEST(LaunchProgram, DivisionsByZeroGiveZeroInsteadOfTrapping) {
  for (Op op : {Op::DivS, Op::RemS, Op::FloorDivS, Op::CeilDivS, Op::DivU, Op::RemU, Op::CeilDivU})
    EXPECT_EQ(apply(op, 7, 0), 0) << static_cast<int>(op);
  for (Op op : {Op::DivS, Op::RemS, Op::FloorDivS, Op::CeilDivS})
    EXPECT_EQ(apply(op, INT64_MIN, -1), 0) << static_cast<int>(op);
}

TEST(LaunchProgram, GridsFromSizes) {
  // ceil(n / 256) as lower-affine writes it: n <= 0 ? -((-n) / 256) : (n - 1) / 256 + 1.
  const std::vector<LaunchExpr> program = {
      {Op::Size, 0},       {Op::Constant, 0}, {Op::Constant, 1}, {Op::Constant, 256}, {Op::Le, 0, 1},
      {Op::Sub, 1, 0},     {Op::Sub, 0, 2},   {Op::Select, 4, 5, 6}, {Op::DivS, 7, 3}, {Op::Sub, 1, 8},
      {Op::Add, 8, 2},     {Op::Select, 4, 9, 10}};
  ASSERT_EQ(checkLaunchProgram(program, 1), "");
  std::vector<int64_t> values;
  for (int64_t n : {0, 1, 255, 256, 257, 70000}) {
    runLaunchProgram(program, &n, values);
    EXPECT_EQ(values.back(), (n + 255) / 256) << n;
  }
}

TEST(LaunchProgram, TheCheckerRefusesStepsThatReadLaterStepsOrMissingSizes) {
  EXPECT_EQ(checkLaunchProgram({}, 0), "");
  EXPECT_NE(checkLaunchProgram({{Op::Constant, 1}}, 0).find("takes no sizes"), std::string::npos);
  EXPECT_NE(checkLaunchProgram({{Op::Size, 2}}, 2).find("reads size 2 of 2"), std::string::npos);
  EXPECT_NE(checkLaunchProgram({{Op::Size, -1}}, 2).find("reads size -1"), std::string::npos);
  EXPECT_NE(checkLaunchProgram({{Op::Size, 0}, {Op::Add, 0, 1}}, 1).find("step 1 reads step 1"), std::string::npos);
  EXPECT_NE(checkLaunchProgram({{Op::Size, 0}, {Op::Select, 0, 0, 5}}, 1).find("reads step 5"), std::string::npos);
  EXPECT_NE(checkLaunchProgram({{static_cast<Op>(99), 0}}, 1).find("unknown operation"), std::string::npos);
}

}  // namespace
}  // namespace kiln::exec
