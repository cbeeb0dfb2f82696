// hal::Driver and hal::DeviceContext: one backend (cpu, cuda, level_zero)
// and one device it exposes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kiln/device.h"
#include "runtime/backends/Allocator.h"
#include "runtime/backends/Stream.h"
#include "runtime/exec/CompileTarget.h"

namespace kiln::interp {
class OpLibrary;
}  // namespace kiln::interp
namespace kiln::exec {
class KernelLoader;
}  // namespace kiln::exec

namespace kiln::hal {

/// What a device did since the process started (kiln::device_stats).
struct DeviceCounters {
  uint64_t launches = 0;              ///< kernels launched on the device
  /// Compiled traces launched as one graph (CUDA graphs), graphs built, and
  /// graph launches that first updated kernel parameters.
  uint64_t graph_launches = 0, graphs_built = 0, graph_updates = 0;
  uint64_t copy_bytes_to_device = 0;  ///< host -> device
  uint64_t copy_bytes_to_host = 0;    ///< device -> host
  uint64_t copy_bytes_on_device = 0;  ///< device -> device
};

/// One device of a driver: its allocator and streams.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual Device device() const = 0;
  /// Human-readable name, e.g. the CPU model or GPU name.
  virtual std::string name() const = 0;
  /// Can the host dereference this device's pointers?
  virtual bool hostAccessible() const = 0;
  /// What hot traces on this device are compiled for (the host CPU for the
  /// CPU and the test device); none when it has no compiler target: its
  /// traces stay in its op library.
  virtual std::optional<exec::CompileTarget> compileTarget() const = 0;
  /// Maps kernels compiled for compileTarget() and launches them on this
  /// device (the host's loader for host code); null without a target.
  virtual exec::KernelLoader* kernelLoader() = 0;
  /// Its memory. Memory freed while work on the default stream may still
  /// use it is not handed out again before that work is done.
  virtual Allocator& allocator() = 0;
  /// Its tier-0 kernels (the interpreter runs each op through them).
  virtual interp::OpLibrary& ops() = 0;
  virtual std::unique_ptr<Stream> createStream() = 0;
  /// The stream that runtime work on this device is ordered on.
  virtual Stream& defaultStream() = 0;
  /// Waits until the runtime's work on this device is done; throws
  /// kiln::Error when some of it failed.
  virtual void synchronize() = 0;
  /// Its launch and copy counters (zero where a device does not count them).
  virtual DeviceCounters counters() const { return {}; }
};

/// A backend. Registered explicitly by initializeBackends(), never by a
/// static constructor. A driver whose runtime library is missing registers
/// nothing and reports why through hal::unavailableReason().
class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  virtual Device::Kind kind() const = 0;
  virtual int deviceCount() const = 0;
  virtual DeviceContext& device(int index) = 0;
};

}  // namespace kiln::hal
