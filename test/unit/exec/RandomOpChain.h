// The random op chain the dynamic-shape fuzz tests run at many batch sizes
// (DynamicShapesTest on the CPU, LevelZeroBackendTest on level_zero:0):
// element-wise ops, broadcasts, reductions over the features and over the
// batch, and matmuls, the same chain for one seed at every batch size.
#pragma once

#include <random>

#include "kiln/kiln.h"

namespace kiln {

/// Seven steps on h ([batch, f]) drawn from `rng`, with bias ([f]) and w
/// ([f, f]) on h's device.
inline Tensor randomOpChain(std::mt19937_64& rng, Tensor h, const Tensor& bias, const Tensor& w) {
  for (int k = 0; k < 7; ++k) {
    switch (rng() % 7) {
      case 0: h = h + bias; break;
      case 1: h = tanh(h) * 1.5f; break;
      case 2: h = matmul(h, w); break;
      case 3: h = h - max(h, {1}, true); break;
      case 4: h = where(h > 0.1f, h, bias * 0.5f); break;
      case 5: h = h / (sum(abs(h), {1}, true) + 1.0f); break;
      default: h = h + sum(h, {0}) * 0.01f; break;
    }
  }
  return h;
}

}  // namespace kiln
