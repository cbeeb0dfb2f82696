// Shape: the extents of a tensor, stored inline (no heap allocation).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace kiln {

/// Tensor extents. Rank is at most kMaxRank; a larger rank throws
/// kiln::Error. Stored inline so that recording an op allocates nothing.
class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  /// Product of the extents (1 for rank 0).
  int64_t numel() const;
  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }
  std::span<const int64_t> dims() const { return {dims_, static_cast<size_t>(rank_)}; }

  void push_back(int64_t d);
  void resize(int rank, int64_t fill = 1);

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[2, 3]"; "[]" for rank 0.
  std::string str() const;

 private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

}  // namespace kiln
