// GradientSum: the gradient contributions that reach one tensor during a
// backward pass, summed once the tensor is reached.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::autograd {

/// Collects the contributions to one tensor's gradient. A slice of the
/// tensor that is a block along one axis (step 1, every other axis whole)
/// contributes its gradient as a piece of that axis; when the sum is taken,
/// pieces that do not overlap are placed side by side with one concat (zeros
/// only in the gaps) instead of each being padded with zeros to the full
/// shape and added. A fused QKV projection split into three slices thus gets
/// its gradient as one concat of the three, not three zero-padded copies and
/// two additions.
class GradientSum {
 public:
  /// Adds a contribution of the tensor's own shape.
  void add(const Tensor& g);
  /// Adds `g` as the gradient of elements [start, start + g.shape()[axis])
  /// along `axis` (g has the tensor's extents on every other axis).
  void addPiece(int axis, int64_t start, const Tensor& g);
  /// The sum, for a tensor of `shape` (undefined when nothing was added).
  Tensor take(const Shape& shape);

 private:
  struct Piece {
    int axis;
    int64_t start;
    Tensor g;
  };
  Tensor dense_;
  std::vector<Piece> pieces_;
};

}  // namespace kiln::autograd
