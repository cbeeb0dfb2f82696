// The PTX of the tier-0 kernels (Tier0Kernels.h), embedded in libkiln at
// build time: tools/kiln-gpu-kernels runs Kiln's MLIR pipeline (gpu -> nvvm
// -> PTX) for each kernel and SM version and writes KernelImages.cpp into the
// build tree. A build without the compiler embeds none.
#pragma once

#include <cstddef>
#include <span>

namespace kiln::hal::cuda {

struct KernelImage {
  const char* entry;  ///< Tier0Kernels' entry name
  int smVersion;      ///< 80, 90: the PTX targets sm_<smVersion>
  const char* ptx;    ///< a whole PTX module holding that one entry, NUL-terminated
  std::size_t size;   ///< strlen(ptx)
};

/// Every embedded image, ordered by entry name, then SM version.
std::span<const KernelImage> embeddedKernelImages();

}  // namespace kiln::hal::cuda
