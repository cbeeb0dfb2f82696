#include "runtime/core/TensorSize.h"

#include <cstdio>

#include "kiln/error.h"

namespace kiln::core {

namespace {
/// "about 1.21e+24": the exact value does not fit any integer type here.
std::string approximately(long double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "about %.3Le", x);
  return buf;
}

std::string decimal(unsigned __int128 x) {
  if (x == 0) return "0";
  std::string s;
  for (; x > 0; x /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
  return s;
}
}  // namespace

std::string checkElementCount(const Shape& shape) {
  int64_t nonzero = 1;
  bool overflow = false;
  for (int64_t d : shape)
    if (d != 0 && __builtin_mul_overflow(nonzero, d, &nonzero)) overflow = true;
  if (!overflow) return {};  // every recorded op passes here: keep it cheap
  bool empty = false;
  long double approx = 1;  // for the message only
  for (int64_t d : shape) {
    if (d == 0) empty = true;
    else approx *= static_cast<long double>(d);
  }
  if (empty)
    return "shape " + shape.str() + " has too many elements: it is empty, but the product of its nonzero extents (" +
           approximately(approx) + ", its row-major strides) is more than fits in int64 (at most " +
           std::to_string(INT64_MAX) + "); use smaller extents";
  return "shape " + shape.str() + " has too many elements: the tensor would hold " + approximately(approx) +
         " elements, more than fits in int64 (at most " + std::to_string(INT64_MAX) + "); use smaller extents";
}

std::string denseByteSize(const Shape& shape, DType dtype, int64_t* bytes) {
  const auto esize = static_cast<int64_t>(dtype_size(dtype));
  if (!__builtin_mul_overflow(shape.numel(), esize, bytes)) return {};
  const unsigned __int128 exact = static_cast<unsigned __int128>(shape.numel()) * static_cast<uint64_t>(esize);
  return "shape " + shape.str() + " of " + std::string(dtype_name(dtype)) + " is too large: the tensor would hold " +
         std::to_string(shape.numel()) + " elements = " + decimal(exact) +
         " bytes, more than fits in the address space (at most " + std::to_string(kMaxTensorBytes) +
         " bytes); use smaller extents, or keep it a broadcast view that is never made dense";
}

std::string stridedExtent(const Shape& shape, const int64_t* strides, DType dtype, int64_t* lo, int64_t* hi) {
  *lo = *hi = 0;
  if (shape.numel() == 0) return {};
  auto outside = [&] {
    std::string s = "strides [";
    for (int d = 0; d < shape.rank(); ++d) s += (d ? ", " : "") + std::to_string(strides[d]);
    return s + "] of shape " + shape.str() + " (" + std::string(dtype_name(dtype)) +
           ") reach more memory than fits in the address space (at most " + std::to_string(kMaxTensorBytes) +
           " bytes); check the strides";
  };
  int64_t low = 0, high = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    int64_t span;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span)) return outside();
    int64_t& bound = span < 0 ? low : high;
    if (__builtin_add_overflow(bound, span, &bound)) return outside();
  }
  int64_t elements, bytes;
  if (__builtin_sub_overflow(high, low, &elements) || __builtin_add_overflow(elements, 1, &elements) ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(dtype_size(dtype)), &bytes))
    return outside();
  *lo = low;
  *hi = high;
  return {};
}

void requireElementCount(const char* op, const Shape& shape) {
  if (std::string e = checkElementCount(shape); !e.empty()) throw Error(std::string(op) + ": " + e);
}

std::size_t requireDenseBytesChecked(const char* op, const Shape& shape, DType dtype) {
  requireElementCount(op, shape);
  int64_t bytes = 0;
  if (std::string e = denseByteSize(shape, dtype, &bytes); !e.empty()) throw Error(std::string(op) + ": " + e);
  return static_cast<std::size_t>(bytes);
}

}  // namespace kiln::core
