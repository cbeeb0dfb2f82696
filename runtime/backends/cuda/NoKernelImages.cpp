// A build without the compiler (KILN_BUILD_COMPILER=OFF) cannot generate the
// tier-0 PTX: it embeds none, and the CUDA op library says so at the first
// launch.
#include "runtime/backends/cuda/KernelImages.h"

namespace kiln::hal::cuda {

std::span<const KernelImage> embeddedKernelImages() { return {}; }

}  // namespace kiln::hal::cuda
