// Checked tensor sizes: the one place where element counts, strides and byte
// sizes are computed with overflow checks. Shapes are checked when an op
// records its result (and when a tensor is created from memory); bytes when a
// dense buffer is allocated or copied. Past these checks, Shape::numel(),
// row-major strides and byte offsets of a view cannot overflow int64.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::core {

/// The most bytes Kiln computes with: a byte offset into any buffer fits in
/// int64 (and size_t).
inline constexpr int64_t kMaxTensorBytes = INT64_MAX;

/// Empty when `shape` has a representable element count: the product of its
/// extents, and of its nonzero extents (its row-major strides), fit in int64.
/// Otherwise a message: "shape [..] would hold about N elements, more than
/// fits in int64 ...". Extents must be >= 0.
std::string checkElementCount(const Shape& shape);

/// Bytes of a dense `shape` (already element-count checked) of `dtype` into
/// *bytes; a message instead when they exceed kMaxTensorBytes.
std::string denseByteSize(const Shape& shape, DType dtype, int64_t* bytes);

/// The element offsets, relative to element 0, of the lowest and highest
/// element a strided view of `shape` touches (both 0 when it is empty), into
/// *lo and *hi; a message instead when they, or the bytes between them, are
/// more than fits (the strides reach outside the address space).
std::string stridedExtent(const Shape& shape, const int64_t* strides, DType dtype, int64_t* lo, int64_t* hi);

/// Bytes per element (0 for a value that is no DType), inline: it is on
/// every kernel argument's and every allocation's path. dtype_size is this,
/// throwing for 0.
inline std::size_t elementBytes(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

/// The common case without building messages: the element count (and the
/// nonzero extents' product) and the dense bytes of `shape` with elements of
/// `elementSize` bytes fit in int64.
inline bool denseSizeFits(const Shape& shape, std::size_t elementSize, int64_t* bytes) {
  int64_t nonzero = 1, all = 1;
  for (int64_t d : shape) {
    if (d == 0) all = 0;
    else if (__builtin_mul_overflow(nonzero, d, &nonzero)) return false;
  }
  return !__builtin_mul_overflow(all == 0 ? 0 : nonzero, static_cast<int64_t>(elementSize), bytes);
}
inline bool denseSizeFits(const Shape& shape, std::size_t elementSize) {
  int64_t bytes;
  return denseSizeFits(shape, elementSize, &bytes);
}

/// Throwing forms for the places that allocate or copy: kiln::Error
/// "<op>: <message>".
void requireElementCount(const char* op, const Shape& shape);
std::size_t requireDenseBytesChecked(const char* op, const Shape& shape, DType dtype);
inline std::size_t requireDenseBytes(const char* op, const Shape& shape, DType dtype) {
  // Fits nearly always: then no messages are built (two std::string returns
  // were a tenth of a small op's allocation).
  const std::size_t size = elementBytes(dtype);
  if (int64_t bytes; size != 0 && denseSizeFits(shape, size, &bytes)) [[likely]]
    return static_cast<std::size_t>(bytes);
  return requireDenseBytesChecked(op, shape, dtype);
}

}  // namespace kiln::core
