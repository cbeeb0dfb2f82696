// DLPack 1.x's versioned managed tensor, for builds against an older
// <dlpack/dlpack.h> (Debian's libdlpack-dev is 0.6, which lacks it). The
// layout is DLPack's own (dlpack.h 1.0): a newer header's definition is used
// when present.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>

#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
extern "C" {
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
}
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << UINT64_C(0))
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << UINT64_C(1))
#endif

namespace kiln::capi {
/// The DLPack version Kiln produces in versioned tensors.
inline constexpr uint32_t kDLPackMajor = 1;
inline constexpr uint32_t kDLPackMinor = 0;
/// DLPack's kDLOneAPI (oneAPI USM memory: Level Zero devices), added in
/// DLPack 0.7; Debian's 0.6 header lacks it.
inline constexpr DLDeviceType kDLOneAPIDevice = static_cast<DLDeviceType>(14);
}  // namespace kiln::capi
