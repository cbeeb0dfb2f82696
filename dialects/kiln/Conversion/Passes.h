//===- Passes.h - kiln conversion passes ------------------------*- C++ -*-===//

#ifndef KILN_CONVERSION_PASSES_H
#define KILN_CONVERSION_PASSES_H

#include "dialects/kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kiln {

#define GEN_PASS_DECL
#include "dialects/kiln/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/kiln/Conversion/Passes.h.inc"

} // namespace mlir::kiln

#endif // KILN_CONVERSION_PASSES_H
