// The one place for Kiln's shape and type rules. Plain C++ (no MLIR): the
// recorder, the interpreter and the kiln dialect's verifiers all call these,
// so a trace the recorder accepts always verifies and one it rejects never
// does.
//
// Each check returns an empty string on success, otherwise a message that
// says what is wrong with the shapes and how to fix it; callers prefix the
// op name and throw or emit a diagnostic.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::core {

/// Bit i set = axis i. Rank is at most Shape::kMaxRank, so 8 bits suffice.
using AxisMask = uint32_t;

/// Is `v` a vector along `out`'s last axis: [N], [1, N], ... of no higher
/// rank, N out's last extent (a matmul epilogue's bias)?
inline bool isLastAxisVector(const Shape& v, const Shape& out) {
  const int r = v.rank(), ro = out.rank();
  if (r < 1 || r > ro || v[r - 1] != out[ro - 1]) return false;
  for (int d = 0; d < r - 1; ++d)
    if (v[d] != 1) return false;
  return true;
}

/// NumPy broadcasting of two shapes.
std::string broadcastShapes(const Shape& a, const Shape& b, Shape* out);
/// Can `from` be broadcast to `to` (to's rank >= from's, trailing-aligned)?
std::string checkBroadcastTo(const Shape& from, const Shape& to);
/// Maps a possibly negative axis into [0, rank).
std::string normalizeAxis(int64_t axis, int rank, int* out);
/// Output shape of a reduction; empty `axes` means all. `mask` receives the
/// normalized axes. Repeated axes are an error.
std::string reduceShape(const Shape& in, std::span<const int> axes, bool keepdim, Shape* out,
                        AxisMask* mask);
/// Output shape of a reduction given the normalized mask.
Shape reducedShape(const Shape& in, AxisMask mask, bool keepdim);
/// [..., M, K] x [..., K, N] -> [..., M, N] with broadcast batch dims; both
/// ranks >= 2.
std::string matmulShape(const Shape& a, const Shape& b, Shape* out);
/// Resolves one -1 and checks the element count.
std::string reshapeShape(const Shape& in, const Shape& requested, Shape* out);
std::string permuteShape(const Shape& in, std::span<const int64_t> perm, Shape* out);
/// Python-style normalization of one axis' slice (clamps start/stop); step
/// must be positive. Gives the normalized start and the output extent.
std::string normalizeSlice(int64_t extent, int64_t start, int64_t stop, int64_t step,
                           int64_t* normStart, int64_t* outExtent);
/// Checks a primitive slice: per-axis start and step, output extents.
std::string checkSlice(const Shape& in, std::span<const int64_t> starts, std::span<const int64_t> steps,
                       const Shape& out);
std::string concatShape(std::span<const Shape* const> ins, int axis, Shape* out);
/// x.shape[:axis] + index.shape + x.shape[axis+1:].
std::string indexSelectShape(const Shape& x, int axis, const Shape& index, Shape* out);
/// index_add(x, axis, index, source): index is 1-D and source is x's shape
/// with index's extent along axis; the result has x's shape.
std::string indexAddShape(const Shape& x, int axis, const Shape& index, const Shape& source);
/// scatter_add(x, axis, index, source): gather's index rule (x's rank, at
/// most x's extents off the axis) and source of index's shape; the result
/// has x's shape.
std::string scatterAddShape(const Shape& x, int axis, const Shape& index, const Shape& source);
/// take_along_axis: index has x's rank and index.shape[d] <= x.shape[d] for
/// d != axis; the result has index's shape.
std::string gatherShape(const Shape& x, int axis, const Shape& index, Shape* out);

/// The attributes of a 2-D convolution over NCHW input (the conv2d node's
/// attribute list, in this order).
struct Conv2dParams {
  int64_t strideH = 1, strideW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  int64_t groups = 1;
  static constexpr int kAttrCount = 9;
  /// From the node's attribute list (kAttrCount entries).
  static Conv2dParams fromAttrs(std::span<const int64_t> a);
  void toAttrs(int64_t* a) const;
};
/// x [N, C, H, W] conv w [Co, C/groups, kh, kw] -> [N, Co, Ho, Wo] with
/// Ho = (H + padTop + padBottom - ((kh-1)*dilationH + 1)) / strideH + 1.
/// Strides and dilations >= 1, paddings >= 0, groups >= 1 dividing C and Co;
/// the dilated kernel must fit in the padded input.
std::string conv2dShape(const Shape& x, const Shape& w, const Conv2dParams& p, Shape* out);
/// Output extent of a pooling window over `in` (ONNX/PyTorch semantics):
/// floor or, with ceilMode, ceil of (in + padBegin + padEnd - span) / stride,
/// plus one, where span = (kernel-1)*dilation + 1; with ceilMode a window
/// that would start in the end padding is dropped. Empty on success.
std::string poolExtent(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin, int64_t padEnd,
                       int64_t dilation, bool ceilMode, int64_t* out);
/// ONNX auto_pad SAME_UPPER / SAME_LOWER: the paddings that give
/// ceil(in / stride) outputs (the odd one at the end for SAME_UPPER).
void samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper, int64_t* padBegin,
                 int64_t* padEnd);

/// Type priority of an operand for promotion (see ops.h).
enum class OperandPriority : uint8_t { Scalar, RankZero, Tensor };
struct TypedOperand {
  DType dtype;
  OperandPriority priority;
};
/// PyTorch-style result type of an elementwise op over operands. A C++
/// scalar enters with its category's widest "natural" dtype: bool, i64 or
/// f32 (f32 is the default floating type).
DType resultType(std::span<const TypedOperand> operands);
/// Dtype that transcendental unary ops and true division compute in.
DType floatingResult(DType t);
/// Result dtype of sum and prod.
DType sumResult(DType t);
/// The values an integer dtype holds, [lo, hi]; nullopt for other dtypes.
std::optional<std::pair<int64_t, int64_t>> integerRange(DType t);
/// Are the elements of this dtype allowed for arithmetic op `what`? Returns
/// an error message for sub/neg on bool, ... (empty when allowed).
std::string checkArithmetic(const char* what, DType t);

}  // namespace kiln::core
