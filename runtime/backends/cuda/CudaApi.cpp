#include "runtime/backends/cuda/CudaApi.h"

#include <dlfcn.h>

#include <mutex>

#include "kiln/error.h"
#include "runtime/support/DynamicSymbols.h"
#include "kiln/runtime.h"

namespace kiln::hal::cuda {

namespace {

using support::resolveSymbol;

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
  resolveSymbol(handle, a.init, "cuInit", missing);
  resolveSymbol(handle, a.driverGetVersion, "cuDriverGetVersion", missing);
  resolveSymbol(handle, a.getErrorName, "cuGetErrorName", missing);
  resolveSymbol(handle, a.getErrorString, "cuGetErrorString", missing);
  resolveSymbol(handle, a.deviceGetCount, "cuDeviceGetCount", missing);
  resolveSymbol(handle, a.deviceGet, "cuDeviceGet", missing);
  resolveSymbol(handle, a.deviceGetName, "cuDeviceGetName", missing);
  resolveSymbol(handle, a.deviceGetAttribute, "cuDeviceGetAttribute", missing);
  resolveSymbol(handle, a.deviceTotalMem, "cuDeviceTotalMem_v2", missing);
  resolveSymbol(handle, a.devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  resolveSymbol(handle, a.devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  resolveSymbol(handle, a.ctxSetCurrent, "cuCtxSetCurrent", missing);
  resolveSymbol(handle, a.ctxSynchronize, "cuCtxSynchronize", missing);
  resolveSymbol(handle, a.streamCreate, "cuStreamCreate", missing);
  resolveSymbol(handle, a.streamDestroy, "cuStreamDestroy_v2", missing);
  resolveSymbol(handle, a.streamSynchronize, "cuStreamSynchronize", missing);
  resolveSymbol(handle, a.streamWaitEvent, "cuStreamWaitEvent", missing);
  resolveSymbol(handle, a.launchHostFunc, "cuLaunchHostFunc", missing);
  resolveSymbol(handle, a.eventCreate, "cuEventCreate", missing);
  resolveSymbol(handle, a.eventDestroy, "cuEventDestroy_v2", missing);
  resolveSymbol(handle, a.eventRecord, "cuEventRecord", missing);
  resolveSymbol(handle, a.eventQuery, "cuEventQuery", missing);
  resolveSymbol(handle, a.eventSynchronize, "cuEventSynchronize", missing);
  resolveSymbol(handle, a.memAlloc, "cuMemAlloc_v2", missing);
  resolveSymbol(handle, a.memFree, "cuMemFree_v2", missing);
  resolveSymbol(handle, a.memGetInfo, "cuMemGetInfo_v2", missing);
  resolveSymbol(handle, a.memHostAlloc, "cuMemHostAlloc", missing);
  resolveSymbol(handle, a.memFreeHost, "cuMemFreeHost", missing);
  resolveSymbol(handle, a.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", missing);
  resolveSymbol(handle, a.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", missing);
  resolveSymbol(handle, a.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  resolveSymbol(handle, a.memsetD8Async, "cuMemsetD8Async", missing);
  resolveSymbol(handle, a.memsetD32Async, "cuMemsetD32Async", missing);
  resolveSymbol(handle, a.pointerGetAttribute, "cuPointerGetAttribute", missing);
  resolveSymbol(handle, a.moduleLoadData, "cuModuleLoadData", missing);
  resolveSymbol(handle, a.moduleUnload, "cuModuleUnload", missing);
  resolveSymbol(handle, a.moduleGetFunction, "cuModuleGetFunction", missing);
  resolveSymbol(handle, a.launchKernel, "cuLaunchKernel", missing);
  // Optional (CudaApi::hasGraphs): the versioned names cuda.h maps them to.
  std::string noGraphs;
  resolveSymbol(handle, a.graphCreate, "cuGraphCreate", noGraphs);
  resolveSymbol(handle, a.graphAddKernelNode, "cuGraphAddKernelNode_v2", noGraphs);
  resolveSymbol(handle, a.graphInstantiate, "cuGraphInstantiateWithFlags", noGraphs);
  resolveSymbol(handle, a.graphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", noGraphs);
  resolveSymbol(handle, a.graphLaunch, "cuGraphLaunch", noGraphs);
  resolveSymbol(handle, a.graphExecDestroy, "cuGraphExecDestroy", noGraphs);
  resolveSymbol(handle, a.graphDestroy, "cuGraphDestroy", noGraphs);
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
