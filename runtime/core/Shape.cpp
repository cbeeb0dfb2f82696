#include "kiln/shape.h"

#include "kiln/error.h"

namespace kiln {

namespace {
[[noreturn]] void rankTooLarge(size_t rank) {
  throw Error("Shape: rank " + std::to_string(rank) + " exceeds Kiln's maximum rank " +
              std::to_string(Shape::kMaxRank) + "; reshape to fewer axes");
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > kMaxRank) rankTooLarge(dims.size());
  rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < rank_; ++i) dims_[i] = dims[i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

void Shape::push_back(int64_t d) {
  if (rank_ == kMaxRank) rankTooLarge(rank_ + 1);
  dims_[rank_++] = d;
}

void Shape::resize(int rank, int64_t fill) {
  if (rank > kMaxRank) rankTooLarge(rank);
  for (int i = rank_; i < rank; ++i) dims_[i] = fill;
  rank_ = rank;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace kiln
