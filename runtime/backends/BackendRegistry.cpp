#include <algorithm>
#include <mutex>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"
#include "kiln/runtime.h"
#include "runtime/backends/cpu/CpuBackend.h"
#ifdef KILN_HAVE_CUDA_BACKEND
#include "runtime/backends/cuda/CudaBackend.h"
#endif
#ifdef KILN_HAVE_LEVEL_ZERO_BACKEND
#include "runtime/backends/level_zero/LevelZeroBackend.h"
#endif
#include "runtime/backends/test/TestBackend.h"

namespace kiln::hal {

namespace {
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Driver>> drivers;
  std::string cudaUnavailable;  ///< why the CUDA driver did not register
  std::string levelZeroUnavailable;  ///< why the Level Zero driver did not register
};
Registry& registry() {
  static Registry* r = new Registry();  // leaked: outlives every tensor at exit
  return *r;
}
void addLocked(Registry& r, std::unique_ptr<Driver> d) {
  for (auto& existing : r.drivers)
    if (existing->kind() == d->kind()) throw Error("registerDriver: a driver for " + d->name() + " is already registered");
  r.drivers.push_back(std::move(d));
}
}  // namespace

void initializeBackends() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    addLocked(r, createCpuDriver());
    if (int n = settings().test_devices; n > 0) addLocked(r, createTestDriver(n));
#ifdef KILN_HAVE_CUDA_BACKEND
    std::string why;
    if (auto cuda = createCudaDriver(&why)) addLocked(r, std::move(cuda));
    else r.cudaUnavailable = why;
#else
    r.cudaUnavailable = "this Kiln was built without its CUDA backend (no CUDA toolkit headers at build time)";
#endif
#ifdef KILN_HAVE_LEVEL_ZERO_BACKEND
    std::string zeWhy;
    if (auto ze = createLevelZeroDriver(&zeWhy)) addLocked(r, std::move(ze));
    else r.levelZeroUnavailable = zeWhy;
#else
    r.levelZeroUnavailable =
        "this Kiln was built without its Level Zero backend (no level_zero/ze_api.h at build time: libze-dev)";
#endif
  });
}

void registerDriver(std::unique_ptr<Driver> driver) {
  initializeBackends();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  addLocked(r, std::move(driver));
}

Driver* findDriver(Device::Kind kind) {
  initializeBackends();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& d : r.drivers)
    if (d->kind() == kind) return d.get();
  return nullptr;
}

std::vector<Driver*> drivers() {
  initializeBackends();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Driver*> out;
  for (auto& d : r.drivers) out.push_back(d.get());
  return out;
}

DeviceContext& deviceContext(Device device) {
  if (device == Device::cpu()) {  // the hot path: every interpreted trace asks
    static DeviceContext* cpu = &findDriver(Device::CPU)->device(0);
    return *cpu;
  }
  Driver* d = findDriver(device.kind);
  if (!d) {
    const std::string why = unavailableReason(device.kind);
    throw Error("device " + device.str() + ": no driver for this device kind is available in this process" +
                (why.empty() ? std::string(" (Kiln runs on cpu here; GPU drivers load when their runtime library is "
                                           "installed)")
                             : ": " + why));
  }
  if (device.index < 0 || device.index >= d->deviceCount())
    throw Error("device " + device.str() + ": the " + d->name() + " driver has " + std::to_string(d->deviceCount()) +
                " device(s)");
  return d->device(device.index);
}

std::string unavailableReason(Device::Kind kind) {
  initializeBackends();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (kind == Device::CUDA) return r.cudaUnavailable;
  if (kind == Device::LevelZero) return r.levelZeroUnavailable;
  return {};
}

void synchronizeDevices() {
  for (Driver* d : drivers())
    for (int i = 0; i < d->deviceCount(); ++i) d->device(i).synchronize();
}

Allocator& hostAllocator() {
  static Allocator* a = &deviceContext(Device::cpu()).allocator();
  return *a;
}

}  // namespace kiln::hal
