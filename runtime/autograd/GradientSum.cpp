#include "runtime/autograd/GradientSum.h"

#include <algorithm>

#include "kiln/ops.h"

namespace kiln::autograd {

void GradientSum::add(const Tensor& g) { dense_ = dense_.defined() ? kiln::add(dense_, g) : g; }

void GradientSum::addPiece(int axis, int64_t start, const Tensor& g) { pieces_.push_back({axis, start, g}); }

Tensor GradientSum::take(const Shape& shape) {
  std::stable_sort(pieces_.begin(), pieces_.end(), [](const Piece& a, const Piece& b) {
    return a.axis != b.axis ? a.axis < b.axis : a.start < b.start;
  });
  Tensor sum = std::move(dense_);
  dense_ = {};
  // Each round lays the pieces of one axis that do not overlap side by side
  // (zeros in the gaps) and adds that layer; the overlapping rest, and other
  // axes' pieces, wait for later rounds.
  while (!pieces_.empty()) {
    const int axis = pieces_.front().axis;
    const DType dtype = pieces_.front().g.dtype();
    const Device device = pieces_.front().g.device();
    auto zerosAlong = [&](int64_t extent) {
      Shape s = shape;
      s[axis] = extent;
      return zeros(s, dtype, device);
    };
    std::vector<Piece> rest;
    std::vector<Tensor> parts;
    int64_t end = 0;
    for (Piece& p : pieces_) {
      if (p.axis != axis || p.start < end) {
        rest.push_back(std::move(p));
        continue;
      }
      if (p.start > end) parts.push_back(zerosAlong(p.start - end));
      end = p.start + p.g.shape()[axis];
      if (p.g.shape()[axis] > 0) parts.push_back(std::move(p.g));
    }
    if (end < shape[axis]) parts.push_back(zerosAlong(shape[axis] - end));
    Tensor layer = parts.empty() ? zeros(shape, dtype, device) : parts.size() == 1 ? parts[0] : concat(parts, axis);
    sum = sum.defined() ? kiln::add(sum, layer) : layer;
    pieces_ = std::move(rest);
  }
  return sum;
}

}  // namespace kiln::autograd
