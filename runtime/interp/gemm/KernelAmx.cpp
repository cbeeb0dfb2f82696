// AMX bf16 kernel: a 32 x 32 block of C in four 16 x 16 f32 tiles (tmm0-3),
// two A tiles (tmm4-5) and two B tiles (tmm6-7) per 32 steps of depth, four
// TDPBF16PS each: every tile loaded is used twice. Full C tiles are loaded and
// stored in place; edge tiles go through a 16 x 16 buffer.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "runtime/interp/gemm/Bf16MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

/// Linux's arch_prctl request for an extended state component, and AMX's
/// tile data component (arch/x86/include/uapi/asm/prctl.h).
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

/// LDTILECFG's 64-byte operand, palette 1: every tile used is 16 rows of 64
/// bytes (an f32 C tile, a bf16 A tile or a pair-packed bf16 B tile alike).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t bytesPerRow[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig makeConfig() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.bytesPerRow[t] = 64;
    cfg.rows[t] = 16;
  }
  return cfg;
}

// In static memory: GCC 12 dropped the zero stores of a stack copy's unused
// entries (it does not see LDTILECFG read them), and LDTILECFG faults on
// nonzero entries past the palette's eight tiles.
constexpr TileConfig kTileConfig = makeConfig();

__attribute__((target("amx-tile"))) void enterAmx() { _tile_loadconfig(&kTileConfig); }

/// Frees the tile state, so the thread's context switches stay cheap.
__attribute__((target("amx-tile"))) void leaveAmx() { _tile_release(); }

/// A C tile's rows and columns inside C (0 when the tile is past C).
struct TileExtent {
  int rows, cols;
  bool full() const { return rows == 16 && cols == 16; }
};

TileExtent extentOf(int mr, int nr, int tileRow, int tileCol) {
  return {std::clamp(mr - 16 * tileRow, 0, 16), std::clamp(nr - 16 * tileCol, 0, 16)};
}

/// Copies the valid part of an edge tile between C and a dense 16 x 16
/// buffer (zeros elsewhere when reading C).
void edgeFromC(const float* c, int64_t ldc, TileExtent e, float* buf) {
  std::memset(buf, 0, sizeof(float) * 256);
  for (int r = 0; r < e.rows; ++r) std::memcpy(buf + r * 16, c + r * ldc, sizeof(float) * e.cols);
}

void edgeToC(const float* buf, TileExtent e, float* c, int64_t ldc) {
  for (int r = 0; r < e.rows; ++r) std::memcpy(c + r * ldc, buf + r * 16, sizeof(float) * e.cols);
}

// Tile numbers must be literals (GCC's intrinsics paste them into the
// instruction's text), hence a pair of functions per C tile.
#define KILN_AMX_C_TILE(T)                                                                              \
  __attribute__((target("amx-tile"))) void startTile##T(const float* c, int64_t ldc, TileExtent e,      \
                                                        bool accumulate, float* buf) {                  \
    if (!accumulate) {                                                                                  \
      _tile_zero(T);                                                                                    \
    } else if (e.full()) {                                                                              \
      _tile_loadd(T, c, ldc * sizeof(float));                                                           \
    } else {                                                                                            \
      edgeFromC(c, ldc, e, buf);                                                                        \
      _tile_loadd(T, buf, 64);                                                                          \
    }                                                                                                   \
  }                                                                                                     \
  __attribute__((target("amx-tile"))) void finishTile##T(float* c, int64_t ldc, TileExtent e, float* buf) { \
    if (e.full()) {                                                                                     \
      _tile_stored(T, c, ldc * sizeof(float));                                                          \
      return;                                                                                           \
    }                                                                                                   \
    _tile_stored(T, buf, 64);                                                                           \
    edgeToC(buf, e, c, ldc);                                                                            \
  }
KILN_AMX_C_TILE(0)
KILN_AMX_C_TILE(1)
KILN_AMX_C_TILE(2)
KILN_AMX_C_TILE(3)
#undef KILN_AMX_C_TILE

template <bool TwoRows, bool TwoCols>
__attribute__((target("amx-tile,amx-bf16"))) void block(int kTiles, Bf16APanels a, const uint16_t* b,
                                                         int64_t panelStride, float* c, int64_t ldc, int mr, int nr,
                                                         bool accumulate) {
  alignas(64) float buf[256];
  const TileExtent e00 = extentOf(mr, nr, 0, 0), e01 = extentOf(mr, nr, 0, 1), e10 = extentOf(mr, nr, 1, 0),
                   e11 = extentOf(mr, nr, 1, 1);
  float* c01 = c + 16;
  float* c10 = c + 16 * ldc;
  float* c11 = c10 + 16;
  startTile0(c, ldc, e00, accumulate, buf);
  if constexpr (TwoCols) startTile1(c01, ldc, e01, accumulate, buf);
  if constexpr (TwoRows) startTile2(c10, ldc, e10, accumulate, buf);
  if constexpr (TwoRows && TwoCols) startTile3(c11, ldc, e11, accumulate, buf);
  const uint16_t* a0 = a.p;
  const uint16_t* a1 = a.p + a.panelStride;
  const int64_t aStride = a.rowStride * static_cast<int64_t>(sizeof(uint16_t));
  const uint16_t* b1 = b + panelStride;
  for (int t = 0; t < kTiles; ++t) {
    const int64_t off = static_cast<int64_t>(t) * kBf16TileElems, aOff = t * a.tileStep;
    _tile_loadd(4, a0 + aOff, aStride);
    _tile_loadd(6, b + off, 64);
    if constexpr (TwoRows) _tile_loadd(5, a1 + aOff, aStride);
    if constexpr (TwoCols) _tile_loadd(7, b1 + off, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TwoCols) _tile_dpbf16ps(1, 4, 7);
    if constexpr (TwoRows) _tile_dpbf16ps(2, 5, 6);
    if constexpr (TwoRows && TwoCols) _tile_dpbf16ps(3, 5, 7);
  }
  finishTile0(c, ldc, e00, buf);
  if constexpr (TwoCols) finishTile1(c01, ldc, e01, buf);
  if constexpr (TwoRows) finishTile2(c10, ldc, e10, buf);
  if constexpr (TwoRows && TwoCols) finishTile3(c11, ldc, e11, buf);
}

void run(int kTiles, Bf16APanels a, const uint16_t* b, int64_t panelStride, float* c, int64_t ldc, int mr, int nr,
         bool accumulate) {
  const bool twoRows = mr > 16, twoCols = nr > 16;
  if (twoRows && twoCols) return block<true, true>(kTiles, a, b, panelStride, c, ldc, mr, nr, accumulate);
  if (twoRows) return block<true, false>(kTiles, a, b, panelStride, c, ldc, mr, nr, accumulate);
  if (twoCols) return block<false, true>(kTiles, a, b, panelStride, c, ldc, mr, nr, accumulate);
  block<false, false>(kTiles, a, b, panelStride, c, ldc, mr, nr, accumulate);
}

}  // namespace

bool requestAmxPermission() { return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0; }

const Bf16MicroKernel& amxBf16MicroKernel() {
  // kc 1024: one depth pass for K <= 1024, so C is written once (the tiles
  // stay in the accumulators; a second pass would reload them from C).
  // mc 64 and nc 2048 were the fastest of kc {256, 512, 1024} x mc {64, 128,
  // 256, 512} x nc {256 ... 2048} at 1024^3 and 4096 x 4096 x 1024 on a
  // 2-core Sapphire Rapids (bench/RESULTS.md).
  static const Bf16MicroKernel k{Bf16Isa::amx, 1024, 64, 2048, run, enterAmx, leaveAmx};
  return k;
}

}  // namespace kiln::interp::gemm
