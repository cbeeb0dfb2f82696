// Device: where a tensor lives. A small immutable, hashable value.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

struct Device {
  enum Kind : unsigned char { CPU, CUDA, LevelZero };
  Kind kind = CPU;
  int index = 0;

  static Device cpu() { return {CPU, 0}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  /// "cpu:0", "cuda:1", "level_zero:0".
  std::string str() const;
};

}  // namespace kiln

template <>
struct std::hash<kiln::Device> {
  std::size_t operator()(const kiln::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.kind) << 16) ^ static_cast<std::size_t>(d.index);
  }
};
