// The bf16 GEMM's seam between its blocked driver (Bf16Gemm.cpp) and the
// per-ISA kernels (KernelAmx.cpp, KernelAvx512Bf16.cpp), and the packed
// layouts both sides share. The layouts are AMX's: a packed panel is a run of
// 1 KiB tiles of 16 rows x 64 bytes, one tile per 32 steps of depth.
#pragma once

#include <cstdint>

#include "runtime/interp/gemm/Bf16Gemm.h"

namespace kiln::interp::gemm {

/// Depth steps per tile (32 bf16 = one 64-byte tile row) and rows per tile.
inline constexpr int kBf16TileDepth = 32, kBf16TileRows = 16;
/// bf16 elements in one packed tile.
inline constexpr int kBf16TileElems = kBf16TileDepth * kBf16TileRows;
/// Rows and columns of C one kernel call computes: 2 x 2 tiles.
inline constexpr int kBf16BlockRows = 32, kBf16BlockCols = 32;

// A panel: 16 rows of A; tile t holds depth [32t, 32t+32) row after row:
//   A(r, 32t + k) at panel[t*512 + r*32 + k].
// B panel: 16 columns of B; tile t holds depth [32t, 32t+32) as 16 rows of
// depth pairs ("VNNI" order, what TDPBF16PS and VDPBF16PS multiply):
//   B(32t + 2p + e, n) at panel[t*512 + p*32 + n*2 + e].
// Rows, columns and depth past the matrix are zero.

/// Where a kernel call reads A: row r (< 16) of panel j at depth 32t + k is
/// p[j * panelStride + t * tileStep + r * rowStride + k]. A packed block
/// (packed()) or, for a row-major A whose rows and depth fill whole tiles,
/// A itself (inPlace(): no packing; AMX tile loads take a row stride).
struct Bf16APanels {
  const uint16_t* p;
  int64_t tileStep, rowStride, panelStride;  // elements

  static Bf16APanels packed(const uint16_t* panel, int64_t panelElems) {
    return {panel, kBf16TileElems, kBf16TileDepth, panelElems};
  }
  static Bf16APanels inPlace(const uint16_t* firstRow, int64_t rs) {
    return {firstRow, kBf16TileDepth, rs, kBf16TileRows * rs};
  }
};

/// C[0:mr, 0:nr] (=, or += with `accumulate`) A * B over kTiles tiles of
/// depth, from two A panels (`a`) and two B panels, the second B panel
/// `bPanelStride` elements after `b` (a second panel is only read when mr
/// resp. nr exceeds 16). 1 <= mr, nr <= 32.
using Bf16KernelFn = void (*)(int kTiles, Bf16APanels a, const uint16_t* b, int64_t bPanelStride, float* c,
                              int64_t ldc, int mr, int nr, bool accumulate);

struct Bf16MicroKernel {
  Bf16Isa isa;
  int kc;  // depth per packed block (a multiple of 32)
  int mc;  // rows of A per packed block (a multiple of 32)
  int nc;  // columns of B per packed block (a multiple of 32)
  Bf16KernelFn run;
  /// Called on a thread before its first run() of a GEMM and after its last
  /// (AMX loads and releases its tile configuration there); may be null.
  void (*enter)() = nullptr;
  void (*leave)() = nullptr;
};

const Bf16MicroKernel& amxBf16MicroKernel();
const Bf16MicroKernel& avx512Bf16MicroKernel();

/// Asks the OS for the AMX tile data state for this process (Linux
/// arch_prctl); true when granted. Called once, by cpuSupportsBf16(amx).
bool requestAmxPermission();

}  // namespace kiln::interp::gemm
