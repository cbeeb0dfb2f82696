// Test hooks of the fake CUDA driver (libkiln_fake_cuda.so). Tests reach them
// with dlopen(path, RTLD_NOLOAD) + dlsym on the library Kiln loaded through
// KILN_CUDA_LIBRARY.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>

extern "C" {
/// Fails calls of one kind: "oom" (cuMemAlloc returns
/// CUDA_ERROR_OUT_OF_MEMORY), "launch" (cuLaunchKernel returns
/// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES at the call), "fault" (the kernel fails
/// while it runs: its stream's next synchronisation, and every call after
/// it, returns CUDA_ERROR_LAUNCH_FAILED, sticky as on a GPU), "lost" (every
/// call from then on returns CUDA_ERROR_DEVICE_UNAVAILABLE).
/// The first `skip` matching calls succeed, the next `times` fail.
/// Returns 0, or -1 for an unknown kind.
int kiln_fake_cuda_inject(const char* kind, int skip, int times);
/// Clears every injected failure and the sticky error (a lost device comes back).
void kiln_fake_cuda_reset_faults();
/// How many times the entry point `name` ("cuLaunchKernel", "cuMemAlloc_v2") was called.
size_t kiln_fake_cuda_calls(const char* name);
/// The recent call log, one call per line (the last 4096 calls).
const char* kiln_fake_cuda_log();
void kiln_fake_cuda_clear_log();
/// Bytes of device memory allocated (cuMemAlloc not yet freed) on `device`.
size_t kiln_fake_cuda_bytes_allocated(int device);
/// Launches whose parameters or launch shape the fake rejected (each also
/// returned an error to the caller).
size_t kiln_fake_cuda_rejected_launches();
/// Launches of compiled traces' kernels (KILN_FAKE_CUDA_COMPILED=launch):
/// checked, ordered on their stream, not computed.
size_t kiln_fake_cuda_compiled_launches();
/// Compiled modules ptxas accepted (KILN_FAKE_CUDA_PTXAS).
size_t kiln_fake_cuda_ptxas_checked();
/// Graph launches (cuGraphLaunch) that reached their stream: each node was
/// checked and enqueued as a launch of its own.
size_t kiln_fake_cuda_graph_launches();
/// Enqueues fn(data) on `stream` to run in its order with device memory
/// open, as a kernel does: how the fake cuBLASLt (FakeCublasLt.cpp) computes.
/// `stream` is a CUstream; returns a CUresult.
int kiln_fake_cuda_enqueue_device_work(void* stream, void (*fn)(void*), void* data);
}

/// kiln_fake_cuda_enqueue_device_work of the fake driver Kiln loaded
/// (KILN_CUDA_LIBRARY), for the fake libraries that compute on its streams
/// (FakeCublasLt.cpp, FakeNccl.cpp); null when the driver is not the fake.
using KilnFakeCudaEnqueue = int (*)(void* stream, void (*fn)(void*), void* data);
inline KilnFakeCudaEnqueue kilnFakeCudaEnqueue() {
  const char* path = std::getenv("KILN_CUDA_LIBRARY");
  void* h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return h ? reinterpret_cast<KilnFakeCudaEnqueue>(dlsym(h, "kiln_fake_cuda_enqueue_device_work")) : nullptr;
}
