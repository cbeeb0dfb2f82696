#include "runtime/backends/level_zero/ZeApi.h"

#include <dlfcn.h>

#include <cstdio>

#include "kiln/runtime.h"
#include "runtime/support/DynamicSymbols.h"

namespace kiln::hal::level_zero {

namespace {

using support::resolveSymbol;

struct Loaded {
  ZeApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const std::string& configured = settings().level_zero_library;
  const std::string path = configured.empty() ? "libze_loader.so.1" : configured;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    l.why = path + " not found (" + (err ? err : "dlopen failed") +
            "): no Level Zero loader in this process; install Intel's GPU driver and libze1, or set "
            "KILN_LEVEL_ZERO_LIBRARY to the path of libze_loader.so.1";
    return l;
  }
  ZeApi& a = l.api;
  a.path = path;
  std::string missing;
  resolveSymbol(handle, a.init, "zeInit", missing);
  resolveSymbol(handle, a.driverGet, "zeDriverGet", missing);
  resolveSymbol(handle, a.driverGetProperties, "zeDriverGetProperties", missing);
  resolveSymbol(handle, a.deviceGet, "zeDeviceGet", missing);
  resolveSymbol(handle, a.deviceGetProperties, "zeDeviceGetProperties", missing);
  resolveSymbol(handle, a.deviceGetMemoryProperties, "zeDeviceGetMemoryProperties", missing);
  resolveSymbol(handle, a.deviceGetModuleProperties, "zeDeviceGetModuleProperties", missing);
  resolveSymbol(handle, a.contextCreate, "zeContextCreate", missing);
  resolveSymbol(handle, a.contextDestroy, "zeContextDestroy", missing);
  resolveSymbol(handle, a.commandListCreateImmediate, "zeCommandListCreateImmediate", missing);
  resolveSymbol(handle, a.commandListDestroy, "zeCommandListDestroy", missing);
  resolveSymbol(handle, a.commandListAppendMemoryCopy, "zeCommandListAppendMemoryCopy", missing);
  resolveSymbol(handle, a.commandListAppendMemoryFill, "zeCommandListAppendMemoryFill", missing);
  resolveSymbol(handle, a.commandListAppendLaunchKernel, "zeCommandListAppendLaunchKernel", missing);
  resolveSymbol(handle, a.commandListAppendSignalEvent, "zeCommandListAppendSignalEvent", missing);
  resolveSymbol(handle, a.commandListAppendWaitOnEvents, "zeCommandListAppendWaitOnEvents", missing);
  resolveSymbol(handle, a.eventPoolCreate, "zeEventPoolCreate", missing);
  resolveSymbol(handle, a.eventPoolDestroy, "zeEventPoolDestroy", missing);
  resolveSymbol(handle, a.eventCreate, "zeEventCreate", missing);
  resolveSymbol(handle, a.eventDestroy, "zeEventDestroy", missing);
  resolveSymbol(handle, a.eventHostSignal, "zeEventHostSignal", missing);
  resolveSymbol(handle, a.eventHostSynchronize, "zeEventHostSynchronize", missing);
  resolveSymbol(handle, a.eventQueryStatus, "zeEventQueryStatus", missing);
  resolveSymbol(handle, a.eventHostReset, "zeEventHostReset", missing);
  resolveSymbol(handle, a.memAllocDevice, "zeMemAllocDevice", missing);
  resolveSymbol(handle, a.memFree, "zeMemFree", missing);
  resolveSymbol(handle, a.memGetAllocProperties, "zeMemGetAllocProperties", missing);
  resolveSymbol(handle, a.moduleCreate, "zeModuleCreate", missing);
  resolveSymbol(handle, a.moduleDestroy, "zeModuleDestroy", missing);
  resolveSymbol(handle, a.moduleBuildLogGetString, "zeModuleBuildLogGetString", missing);
  resolveSymbol(handle, a.moduleBuildLogDestroy, "zeModuleBuildLogDestroy", missing);
  resolveSymbol(handle, a.kernelCreate, "zeKernelCreate", missing);
  resolveSymbol(handle, a.kernelDestroy, "zeKernelDestroy", missing);
  resolveSymbol(handle, a.kernelSetGroupSize, "zeKernelSetGroupSize", missing);
  resolveSymbol(handle, a.kernelSetArgumentValue, "zeKernelSetArgumentValue", missing);
  if (!missing.empty()) {
    l.why = path + " has no " + missing + ": the Level Zero loader is too old for Kiln (or "
            "KILN_LEVEL_ZERO_LIBRARY names another library)";
    dlclose(handle);
    return l;
  }
  // The handle stays open for the life of the process (the table points into it).
  if (ze_result_t r = a.init(ZE_INIT_FLAG_GPU_ONLY); r != ZE_RESULT_SUCCESS) {
    l.why = "zeInit failed in " + path + ": " + ZeApi::describe(r) +
            " (no Level Zero GPU driver is installed, or no Intel GPU is visible to this process)";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

std::string ZeApi::describe(ze_result_t r) {
  const char* name = nullptr;
  switch (r) {
    case ZE_RESULT_SUCCESS: name = "ZE_RESULT_SUCCESS"; break;
    case ZE_RESULT_NOT_READY: name = "ZE_RESULT_NOT_READY"; break;
    case ZE_RESULT_ERROR_DEVICE_LOST: name = "ZE_RESULT_ERROR_DEVICE_LOST"; break;
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY: name = "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"; break;
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY: name = "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"; break;
    case ZE_RESULT_ERROR_MODULE_BUILD_FAILURE: name = "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"; break;
    case ZE_RESULT_ERROR_UNINITIALIZED: name = "ZE_RESULT_ERROR_UNINITIALIZED"; break;
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE: name = "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"; break;
    case ZE_RESULT_ERROR_INVALID_ARGUMENT: name = "ZE_RESULT_ERROR_INVALID_ARGUMENT"; break;
    case ZE_RESULT_ERROR_INVALID_KERNEL_NAME: name = "ZE_RESULT_ERROR_INVALID_KERNEL_NAME"; break;
    case ZE_RESULT_ERROR_INVALID_NULL_HANDLE: name = "ZE_RESULT_ERROR_INVALID_NULL_HANDLE"; break;
    case ZE_RESULT_ERROR_UNKNOWN: name = "ZE_RESULT_ERROR_UNKNOWN"; break;
    default: break;
  }
  char code[24];
  std::snprintf(code, sizeof code, "0x%x", static_cast<unsigned>(r));
  return name ? std::string(name) + " (" + code + ")" : std::string("Level Zero error ") + code;
}

const ZeApi* loadZeApi(std::string* why) {
  static Loaded* loaded = new Loaded(load());  // leaked: the driver outlives every tensor at exit
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace kiln::hal::level_zero
