// Trace boundaries and devices of the public API.
#include <atomic>
#include <mutex>

#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/backends/Hal.h"
#include "runtime/support/Log.h"
#include "runtime/trace/Recorder.h"

namespace kiln {

void sync() {
  trace::Recorder::current().flush(trace::FlushReason::Sync);
  // Work the flush left on device streams (and copies) finishes here.
  hal::synchronizeDevices();
}

void step() { trace::Recorder::current().flush(trace::FlushReason::Step); }

namespace {
std::atomic<uint32_t> gDefaultDevice{0};  // kind << 16 | index
std::once_flag gDefaultDeviceOnce;

uint32_t packDevice(Device d) { return (static_cast<uint32_t>(d.kind) << 16) | static_cast<uint32_t>(d.index); }

/// KILN_DEFAULT_DEVICE, once: a name that does not parse or a device that is
/// not there leaves cpu:0, with one warning.
void readDefaultDevice() {
  const std::string& text = settings().default_device;
  if (text.empty() || text == "cpu") return;
  try {
    Device d = Device::parse(text);
    hal::deviceContext(d);
    gDefaultDevice.store(packDevice(d));
  } catch (const Error& e) {
    exec::log().warn("KILN_DEFAULT_DEVICE={}: {}; using cpu:0", text, e.what());
  }
}
}  // namespace

Device default_device() {
  std::call_once(gDefaultDeviceOnce, readDefaultDevice);
  const uint32_t packed = gDefaultDevice.load(std::memory_order_relaxed);
  return Device{static_cast<Device::Kind>(packed >> 16), static_cast<int>(packed & 0xffff)};
}

void set_default_device(Device device) {
  std::call_once(gDefaultDeviceOnce, readDefaultDevice);
  hal::deviceContext(device);  // throws naming the missing driver or index
  gDefaultDevice.store(packDevice(device));
}

int device_count(Device::Kind kind) {
  hal::Driver* d = hal::findDriver(kind);
  return d ? d->deviceCount() : 0;
}

}  // namespace kiln
