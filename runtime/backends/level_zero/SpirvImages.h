// The SPIR-V of the tier-0 kernels (gpu/Tier0Kernels.h), embedded in libkiln
// at build time: tools/kiln-gpu-kernels --spirv runs Kiln's MLIR pipeline
// (gpu -> spirv with the Kernel capability) for each kernel and writes
// SpirvImages.cpp into the build tree. A build without the compiler embeds
// none.
#pragma once

#include <cstddef>
#include <span>

namespace kiln::hal::level_zero {

struct SpirvImage {
  const char* entry;          ///< Tier0Kernels' entry name (the module's one kernel)
  const unsigned char* data;  ///< a whole SPIR-V module (little-endian words)
  std::size_t size;           ///< bytes
};

/// Every embedded image, ordered by entry name.
std::span<const SpirvImage> embeddedSpirvImages();

}  // namespace kiln::hal::level_zero
