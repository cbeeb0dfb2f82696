// What the first-order (GradCheckTest) and second-order
// (HigherOrderGradTest) gradient checks share: how inputs and shapes are
// drawn, the comparison with central differences, and the differentiable
// elementwise ops they walk with the input ranges where their derivatives
// are smooth.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::gradcases {

/// The function a check differentiates: its inputs to one tensor.
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// One differentiable input: shape and how its values are drawn.
struct Input {
  Shape shape;
  double low = -2, high = 2;
  bool awayFromZero = false;  ///< |v| >= 0.2 (kinks of relu/abs, poles of div/log)
};

inline std::vector<double> randomValues(const Input& in, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(in.low, in.high);
  std::vector<double> v(static_cast<size_t>(in.shape.numel()));
  for (double& x : v) {
    do x = u(rng);
    while (in.awayFromZero && std::abs(x) < 0.2);
  }
  return v;
}

/// Seeded random shapes of rank minRank..maxRank with extents 1..maxExtent.
inline Shape randomShape(std::mt19937_64& rng, int minRank = 1, int maxRank = 3, int maxExtent = 4) {
  std::uniform_int_distribution<int> r(minRank, maxRank), e(1, maxExtent);
  Shape s;
  for (int d = r(rng); d > 0; --d) s.push_back(e(rng));
  return s;
}

/// Expects analytic[i] (f64, of inputs[i]'s shape) to match the central
/// differences, step h, of `scalarAt()`, a scalar function of the current
/// `values` (which it reads): each element of each input moved by +-h.
inline void expectCentralDifferences(const std::vector<Input>& inputs, std::vector<std::vector<double>>& values,
                                     const std::vector<Tensor>& analytic, const std::function<double()>& scalarAt,
                                     double h, double tol) {
  ASSERT_EQ(analytic.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(analytic[i].shape(), inputs[i].shape) << "input " << i;
    ASSERT_EQ(analytic[i].dtype(), DType::f64);
    std::vector<double> a = analytic[i].to_vector<double>();
    for (size_t j = 0; j < values[i].size(); ++j) {
      const double saved = values[i][j];
      values[i][j] = saved + h;
      const double up = scalarAt();
      values[i][j] = saved - h;
      const double down = scalarAt();
      values[i][j] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(a[j], numeric, tol * (1 + std::abs(numeric))) << "input " << i << " element " << j;
    }
  }
}

struct UnaryCase {
  const char* name;
  Tensor (*op)(const Tensor&);
  double low, high;
  bool awayFromZero;  ///< |v| >= 0.2 (kinks of relu/abs, poles of div/log)
};

inline const std::vector<UnaryCase>& unaryCases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", neg, -2, 2, false},          {"abs", abs, -2, 2, true},
      {"exp", exp, -2, 2, false},          {"log", log, 0.2, 3, false},
      {"sqrt", sqrt, 0.2, 3, false},       {"rsqrt", rsqrt, 0.2, 3, false},
      {"tanh", tanh, -2, 2, false},        {"sigmoid", sigmoid, -3, 3, false},
      {"relu", relu, -2, 2, true},         {"sin", sin, -3, 3, false},
      {"cos", cos, -3, 3, false},          {"reciprocal", reciprocal, -2, 2, true},
      {"atan", atan, -3, 3, false},        {"log2", log2, 0.2, 3, false},
      {"square", square, -2, 2, false},    {"gelu", gelu, -3, 3, false},
      {"erf", erf, -2, 2, false},          {"expm1", expm1, -2, 2, false},
      {"log1p", log1p, -0.5, 3, false},    {"gelu_exact", gelu_exact, -3, 3, false},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }, -2, 2, true},
  };
  return cases;
}

struct BinaryCase {
  const char* name;
  Tensor (*op)(const Operand&, const Operand&);
  double low, high;
  bool awayFromZero;
};

inline const std::vector<BinaryCase>& binaryCases() {
  static const std::vector<BinaryCase> cases = {
      {"add", add, -2, 2, false}, {"sub", sub, -2, 2, false},         {"mul", mul, -2, 2, false},
      {"div", div, -2, 2, true},  {"pow", pow, 0.3, 2, false},        {"maximum", maximum, -2, 2, false},
      {"minimum", minimum, -2, 2, false},
      // Piecewise: away from zero keeps the quotient's jumps rare.
      {"fmod", fmod, -3, 3, true},  {"remainder", remainder, -3, 3, true},
  };
  return cases;
}

}  // namespace kiln::gradcases
