// Which micro-kernel the GEMM runs: the best this CPU supports, unless
// KILN_GEMM_ISA (read here and nowhere else) or a test asks for a lower one.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/interp/gemm/MicroKernel.h"
#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp::gemm {

namespace {

Isa bestSupported() {
  if (cpuSupports(Isa::avx512)) return Isa::avx512;
  if (cpuSupports(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa clampToCpu(Isa isa) {
  while (isa != Isa::scalar && !cpuSupports(isa)) isa = static_cast<Isa>(static_cast<int>(isa) - 1);
  return isa;
}

Isa initialIsa() {
  const Isa best = bestSupported();
  const char* v = std::getenv("KILN_GEMM_ISA");
  if (!v || !*v) return best;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (std::strcmp(v, isaName(isa)) != 0) continue;
    if (cpuSupports(isa)) return isa;
    std::fprintf(stderr, "kiln: ignoring KILN_GEMM_ISA=%s (this CPU lacks it; using %s)\n", v, isaName(best));
    return best;
  }
  std::fprintf(stderr, "kiln: ignoring KILN_GEMM_ISA=%s (expected scalar, avx2 or avx512; using %s)\n", v,
               isaName(best));
  return best;
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{initialIsa()};
  return isa;
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

bool cpuSupports(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      // GCC's check includes the OS enabling the zmm state (XCR0).
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

Isa activeIsa() { return active().load(std::memory_order_relaxed); }

Isa setActiveIsa(Isa isa) { return active().exchange(clampToCpu(isa), std::memory_order_relaxed); }

const MicroKernel& microKernelFor(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return avx512MicroKernel();
    case Isa::avx2:
      return avx2MicroKernel();
    case Isa::scalar:
      break;
  }
  return scalarMicroKernel();
}

}  // namespace kiln::interp::gemm
