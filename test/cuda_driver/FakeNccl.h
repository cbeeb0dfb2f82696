// Test hooks of the fake NCCL (libkiln_fake_nccl.so). Tests reach them with
// dlopen(path, RTLD_NOLOAD) + dlsym on the library Kiln loaded through
// KILN_NCCL_LIBRARY (kilnFakeNcclCollectives below).
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>

extern "C" {
/// Collectives called in this process (every rank's own count).
size_t kiln_fake_nccl_collectives();
}

/// kiln_fake_nccl_collectives of the NCCL library Kiln loaded
/// (KILN_NCCL_LIBRARY); null when that is not the fake or is not loaded.
using KilnFakeNcclCount = size_t (*)();
inline KilnFakeNcclCount kilnFakeNcclCollectives() {
  const char* path = std::getenv("KILN_NCCL_LIBRARY");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return lib ? reinterpret_cast<KilnFakeNcclCount>(dlsym(lib, "kiln_fake_nccl_collectives")) : nullptr;
}
