// The training-like step the exec tests compile and compare: matmul, bias,
// activation, softmax and reductions, flushed as one trace.
#pragma once

#include <vector>

#include "kiln/kiln.h"

namespace kiln {

inline std::vector<float> stepOnce(const Tensor& x, const Tensor& w, const Tensor& b, float scale = 0.5f) {
  Tensor h = tanh(matmul(x, w) + b) * scale;
  Tensor p = softmax(h, 1);
  Tensor out = sum(p * h, {1}) + mean(h, {0}).sum();
  std::vector<float> r = out.to_vector<float>();
  step();
  return r;
}

}  // namespace kiln
