#include "runtime/backends/cuda/CudaApi.h"

#include <dlfcn.h>

#include <mutex>

#include "kiln/error.h"
#include "kiln/runtime.h"

namespace kiln::hal::cuda {

namespace {

/// Resolves `symbol` into `slot`; records the first missing one.
template <class F>
void resolve(void* handle, F& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!slot && missing.empty()) missing = symbol;
}

struct Loaded {
  CudaApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const std::string& configured = settings().cuda_library;
  const std::string path = configured.empty() ? "libcuda.so.1" : configured;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    l.why = path + " not found (" + (err ? err : "dlopen failed") +
            "): no CUDA driver in this process; install the NVIDIA driver or set KILN_CUDA_LIBRARY to the path of "
            "libcuda.so.1";
    return l;
  }
  CudaApi& a = l.api;
  a.path = path;
  std::string missing;
  resolve(handle, a.init, "cuInit", missing);
  resolve(handle, a.driverGetVersion, "cuDriverGetVersion", missing);
  resolve(handle, a.getErrorName, "cuGetErrorName", missing);
  resolve(handle, a.getErrorString, "cuGetErrorString", missing);
  resolve(handle, a.deviceGetCount, "cuDeviceGetCount", missing);
  resolve(handle, a.deviceGet, "cuDeviceGet", missing);
  resolve(handle, a.deviceGetName, "cuDeviceGetName", missing);
  resolve(handle, a.deviceGetAttribute, "cuDeviceGetAttribute", missing);
  resolve(handle, a.deviceTotalMem, "cuDeviceTotalMem_v2", missing);
  resolve(handle, a.devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  resolve(handle, a.devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  resolve(handle, a.ctxSetCurrent, "cuCtxSetCurrent", missing);
  resolve(handle, a.ctxSynchronize, "cuCtxSynchronize", missing);
  resolve(handle, a.streamCreate, "cuStreamCreate", missing);
  resolve(handle, a.streamDestroy, "cuStreamDestroy_v2", missing);
  resolve(handle, a.streamSynchronize, "cuStreamSynchronize", missing);
  resolve(handle, a.streamWaitEvent, "cuStreamWaitEvent", missing);
  resolve(handle, a.launchHostFunc, "cuLaunchHostFunc", missing);
  resolve(handle, a.eventCreate, "cuEventCreate", missing);
  resolve(handle, a.eventDestroy, "cuEventDestroy_v2", missing);
  resolve(handle, a.eventRecord, "cuEventRecord", missing);
  resolve(handle, a.eventQuery, "cuEventQuery", missing);
  resolve(handle, a.eventSynchronize, "cuEventSynchronize", missing);
  resolve(handle, a.memAlloc, "cuMemAlloc_v2", missing);
  resolve(handle, a.memFree, "cuMemFree_v2", missing);
  resolve(handle, a.memGetInfo, "cuMemGetInfo_v2", missing);
  resolve(handle, a.memHostAlloc, "cuMemHostAlloc", missing);
  resolve(handle, a.memFreeHost, "cuMemFreeHost", missing);
  resolve(handle, a.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", missing);
  resolve(handle, a.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", missing);
  resolve(handle, a.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  resolve(handle, a.memsetD8Async, "cuMemsetD8Async", missing);
  resolve(handle, a.memsetD32Async, "cuMemsetD32Async", missing);
  resolve(handle, a.pointerGetAttribute, "cuPointerGetAttribute", missing);
  resolve(handle, a.moduleLoadData, "cuModuleLoadData", missing);
  resolve(handle, a.moduleUnload, "cuModuleUnload", missing);
  resolve(handle, a.moduleGetFunction, "cuModuleGetFunction", missing);
  resolve(handle, a.launchKernel, "cuLaunchKernel", missing);
  if (!missing.empty()) {
    l.why = path + " has no " + missing + ": the CUDA driver is too old for Kiln (or KILN_CUDA_LIBRARY names "
            "another library)";
    dlclose(handle);
    return l;
  }
  // The handle stays open for the life of the process (the table points into it).
  if (CUresult r = a.init(0); r != CUDA_SUCCESS) {
    l.why = "cuInit failed in " + path + ": " + a.describe(r);
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

std::string CudaApi::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (getErrorName) getErrorName(r, &name);
  if (getErrorString) getErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

void CudaApi::check(CUresult r, const std::string& what) const {
  if (r != CUDA_SUCCESS) throw Error(what + ": " + describe(r));
}

const CudaApi* loadCudaApi(std::string* why) {
  static Loaded* loaded = new Loaded(load());  // leaked: the driver outlives every tensor at exit
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace kiln::hal::cuda
