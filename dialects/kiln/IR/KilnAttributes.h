//===- KilnAttributes.h - Attributes the lowering leaves -----*- C++ -*-===//
//
// Names of the discardable attributes that the kiln-to-linalg lowering
// leaves on ops for the target's passes. Header-only, without the dialect,
// so that target code can read them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNATTRIBUTES_H
#define KILN_IR_KILNATTRIBUTES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::kiln {

/// Unit attribute on a kiln.exp, and on the math.exp it lowers to: the
/// operand is <= 0 or NaN (x - max(x) over the axes x is reduced on, as in
/// softmax, or -|x| in sigmoid), so the CPU's exp needs no overflow clamp
/// and scales by 2^k more cheaply (jit/targets/cpu, ExpScaledExactly).
inline constexpr llvm::StringLiteral kNonPositiveOperandAttr =
    "kiln.nonpositive_operand";

} // namespace mlir::kiln

#endif // KILN_IR_KILNATTRIBUTES_H
