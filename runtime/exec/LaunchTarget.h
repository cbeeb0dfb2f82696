// LaunchTarget: the device a compiled kernel runs on (the trace's): its
// memory, its op library (for dense copies of strided inputs) and its stream.
// Kernels compiled for the host run at once on the CPU, and as a task of the
// default stream on a device that runs host code (the test device), so that
// they are ordered with the device's other work and its frees. GPU kernels
// enqueue their launches on the device's default stream themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backends/Hal.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/exec/Executable.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::exec {

class LaunchTarget {
 public:
  explicit LaunchTarget(Device device);

  /// A fresh dense buffer of `shape` elements of `t` on the device.
  core::View alloc(DType t, const Shape& shape);
  std::shared_ptr<core::Storage> scratch(std::size_t bytes);
  /// `v` as a dense buffer on the device: itself when it already is one.
  core::View dense(const core::View& v, DType t, const Shape& shape);
  /// A rank-0 buffer holding `f` (floating `t`) or `i` where the kernel
  /// reads it: host memory for host code (`hostSlot`, 8 bytes the caller
  /// keeps until the kernel has run), else device memory filled on the
  /// device's stream (kept in `keep` until the caller drops it: frees are
  /// stream-ordered).
  void* constant(DType t, double f, int64_t i, uint64_t* hostSlot, std::vector<core::View>& keep);
  /// Does the device run host code (kernels compiled for the host)?
  bool runsHostCode() const { return hostCode_; }
  /// The values of an integer view as i64, on the host (waits for the
  /// device when it is not host-accessible).
  std::vector<int64_t> readIndices(const core::View& v, DType t, const Shape& shape);
  /// Runs `exe` on `args`, followed by a dynamic-shape kernel's sizes when
  /// there are any. `keep` (may be null) holds host memory `args` point
  /// into (scalar arguments) until the kernel has run.
  void launch(const std::shared_ptr<Executable>& exe, std::vector<void*> args, const std::vector<int64_t>& sizes,
              std::shared_ptr<const void> keep = nullptr);

 private:
  hal::DeviceContext& device_;
  interp::OpLibrary& ops_;
  hal::Allocator& allocator_;
  bool hostCode_;
};

}  // namespace kiln::exec
