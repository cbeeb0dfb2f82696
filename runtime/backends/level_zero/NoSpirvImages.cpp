// A build without the compiler (KILN_BUILD_COMPILER=OFF) cannot generate the
// tier-0 SPIR-V: it embeds none, and the Level Zero op library says so at
// the first launch.
#include "runtime/backends/level_zero/SpirvImages.h"

namespace kiln::hal::level_zero {

std::span<const SpirvImage> embeddedSpirvImages() { return {}; }

}  // namespace kiln::hal::level_zero
