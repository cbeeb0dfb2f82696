// Runs of f16 and bf16 values to and from f32: bf16 by shifts and integer
// rounding, f16 by the CPU's F16C instructions where it has them (one
// instruction for 8 values instead of a branchy scalar conversion). The bits
// of core::halfToFloat, core::floatToHalf and core::floatToBf16, except that
// a signalling f16 NaN widens quiet.
#pragma once

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::interp {

/// n elements of type `t` (f16 or bf16), `stride` elements apart (0: one
/// value broadcast), as f32 at out (exact).
void widenHalfRun(DType t, const uint16_t* x, int64_t stride, float* out, int64_t n);

/// n contiguous f32 values rounded to `t` (f16 or bf16) at out, to nearest
/// even as a cast rounds them (a NaN becomes the canonical quiet NaN).
void narrowHalfRun(DType t, const float* x, uint16_t* out, int64_t n);

}  // namespace kiln::interp
