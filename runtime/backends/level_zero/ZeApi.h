// ZeApi: the Level Zero entry points Kiln uses, resolved with dlsym from
// libze_loader.so.1 (or KILN_LEVEL_ZERO_LIBRARY) at run time. Kiln never
// links the loader: ze_api.h (Debian libze-dev) is included for its types
// and prototypes only (decltype), so one build runs with or without an
// Intel GPU.
#pragma once

#include <level_zero/ze_api.h>

#include <string>

namespace kiln::hal::level_zero {

/// The function table; members are named without the `ze` prefix.
struct ZeApi {
  decltype(&::zeInit) init = nullptr;
  decltype(&::zeDriverGet) driverGet = nullptr;
  decltype(&::zeDriverGetProperties) driverGetProperties = nullptr;
  decltype(&::zeDeviceGet) deviceGet = nullptr;
  decltype(&::zeDeviceGetProperties) deviceGetProperties = nullptr;
  decltype(&::zeDeviceGetMemoryProperties) deviceGetMemoryProperties = nullptr;
  decltype(&::zeDeviceGetModuleProperties) deviceGetModuleProperties = nullptr;
  decltype(&::zeContextCreate) contextCreate = nullptr;
  decltype(&::zeContextDestroy) contextDestroy = nullptr;
  decltype(&::zeCommandListCreateImmediate) commandListCreateImmediate = nullptr;
  decltype(&::zeCommandListDestroy) commandListDestroy = nullptr;
  decltype(&::zeCommandListAppendMemoryCopy) commandListAppendMemoryCopy = nullptr;
  decltype(&::zeCommandListAppendMemoryFill) commandListAppendMemoryFill = nullptr;
  decltype(&::zeCommandListAppendLaunchKernel) commandListAppendLaunchKernel = nullptr;
  decltype(&::zeCommandListAppendSignalEvent) commandListAppendSignalEvent = nullptr;
  decltype(&::zeCommandListAppendWaitOnEvents) commandListAppendWaitOnEvents = nullptr;
  decltype(&::zeEventPoolCreate) eventPoolCreate = nullptr;
  decltype(&::zeEventPoolDestroy) eventPoolDestroy = nullptr;
  decltype(&::zeEventCreate) eventCreate = nullptr;
  decltype(&::zeEventDestroy) eventDestroy = nullptr;
  decltype(&::zeEventHostSignal) eventHostSignal = nullptr;
  decltype(&::zeEventHostSynchronize) eventHostSynchronize = nullptr;
  decltype(&::zeEventQueryStatus) eventQueryStatus = nullptr;
  decltype(&::zeEventHostReset) eventHostReset = nullptr;
  decltype(&::zeMemAllocDevice) memAllocDevice = nullptr;
  decltype(&::zeMemFree) memFree = nullptr;
  decltype(&::zeMemGetAllocProperties) memGetAllocProperties = nullptr;
  decltype(&::zeModuleCreate) moduleCreate = nullptr;
  decltype(&::zeModuleDestroy) moduleDestroy = nullptr;
  decltype(&::zeModuleBuildLogGetString) moduleBuildLogGetString = nullptr;
  decltype(&::zeModuleBuildLogDestroy) moduleBuildLogDestroy = nullptr;
  decltype(&::zeKernelCreate) kernelCreate = nullptr;
  decltype(&::zeKernelDestroy) kernelDestroy = nullptr;
  decltype(&::zeKernelSetGroupSize) kernelSetGroupSize = nullptr;
  decltype(&::zeKernelSetArgumentValue) kernelSetArgumentValue = nullptr;

  /// The library the table came from.
  std::string path;
  /// "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000002)" for `r`.
  static std::string describe(ze_result_t r);
};

/// The table, loaded and zeInit-ed once per process; null when the loader
/// cannot be opened or initialised (no driver), with the reason in *why.
const ZeApi* loadZeApi(std::string* why);

}  // namespace kiln::hal::level_zero
