// CudaApi: the CUDA Driver API entry points Kiln uses, resolved with dlsym
// from libcuda.so.1 (or KILN_CUDA_LIBRARY) at run time. Kiln never links the
// driver: cuda.h is included for its types and prototypes only (decltype),
// so one build runs with or without a GPU.
#pragma once

#include <cuda.h>

#include <string>

namespace kiln::hal::cuda {

/// The function table. Members are named without the `cu` prefix: cuda.h
/// maps many entry points to versioned names with macros (cuMemAlloc is
/// cuMemAlloc_v2), and the table resolves exactly those versioned symbols.
struct CudaApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) deviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) devicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamDestroy) streamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuStreamWaitEvent) streamWaitEvent = nullptr;
  decltype(&::cuLaunchHostFunc) launchHostFunc = nullptr;
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventDestroy) eventDestroy = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventQuery) eventQuery = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemGetInfo) memGetInfo = nullptr;
  decltype(&::cuMemHostAlloc) memHostAlloc = nullptr;
  decltype(&::cuMemFreeHost) memFreeHost = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpyDtoHAsync = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpyDtoDAsync = nullptr;
  decltype(&::cuMemsetD8Async) memsetD8Async = nullptr;
  decltype(&::cuMemsetD32Async) memsetD32Async = nullptr;
  decltype(&::cuPointerGetAttribute) pointerGetAttribute = nullptr;
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  // Graphs of kernel nodes (CudaKernelLoader: a compiled trace's kernels as
  // one launch). Optional: null when the driver lacks them, and then
  // compiled traces launch kernel by kernel.
  decltype(&::cuGraphCreate) graphCreate = nullptr;
  decltype(&::cuGraphAddKernelNode) graphAddKernelNode = nullptr;
  decltype(&::cuGraphInstantiate) graphInstantiate = nullptr;
  decltype(&::cuGraphExecKernelNodeSetParams) graphExecKernelNodeSetParams = nullptr;
  decltype(&::cuGraphLaunch) graphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) graphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) graphDestroy = nullptr;
  bool hasGraphs() const {
    return graphCreate && graphAddKernelNode && graphInstantiate && graphExecKernelNodeSetParams && graphLaunch &&
           graphExecDestroy && graphDestroy;
  }

  /// The library the table came from.
  std::string path;
  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for `r`.
  std::string describe(CUresult r) const;
  /// Throws kiln::Error "<what>: <describe(r)>" unless r is CUDA_SUCCESS.
  void check(CUresult r, const std::string& what) const;
};

/// The table, loaded and cuInit-ed once per process; null when the driver
/// cannot be opened or initialised, with the reason in *why (what is
/// missing and how to point Kiln at it).
const CudaApi* loadCudaApi(std::string* why);

}  // namespace kiln::hal::cuda
