// Device: where a tensor lives. A small immutable, hashable value.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

struct Device {
  enum Kind : unsigned char {
    CPU,
    CUDA,
    LevelZero,
    /// A CPU-backed device that behaves like a discrete GPU: its memory is
    /// not host-accessible (the host touching it faults) and its work runs
    /// asynchronously on streams. Registered when KILN_TEST_DEVICES > 0; it
    /// exercises every device path (copies, launches, events, frees) in CI.
    Test,
  };
  Kind kind = CPU;
  int index = 0;

  static Device cpu() { return {CPU, 0}; }
  static Device cuda(int index = 0) { return {CUDA, index}; }
  static Device level_zero(int index = 0) { return {LevelZero, index}; }
  static Device test(int index = 0) { return {Test, index}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  /// "cpu:0", "cuda:1", "level_zero:0", "test:0".
  std::string str() const;
  /// Parses "cpu", "cuda:1", "test:0" (index 0 when omitted); throws
  /// kiln::Error naming the accepted forms.
  static Device parse(const std::string& text);
};

/// The device that creation ops (zeros, from_vector, rand, ...) use when no
/// device is given: cpu:0 unless KILN_DEFAULT_DEVICE or set_default_device()
/// says otherwise. Process-wide.
Device default_device();
/// Throws kiln::Error when no driver provides `device`.
void set_default_device(Device device);
/// How many devices of `kind` this process can use (0 when its driver is
/// missing).
int device_count(Device::Kind kind);

}  // namespace kiln

template <>
struct std::hash<kiln::Device> {
  std::size_t operator()(const kiln::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.kind) << 16) ^ static_cast<std::size_t>(d.index);
  }
};
