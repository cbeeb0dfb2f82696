//===- KilnToLinalg.h - kiln to linalg conversion ---------------*- C++ -*-===//

#ifndef KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
#define KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::kiln {

/// Lowered types of kiln values: tensors of `ui8` become tensors of signless
/// `i8` (the ops keep unsigned semantics); everything else is unchanged.
class KilnTypeConverter : public TypeConverter {
public:
  KilnTypeConverter();
};

/// Patterns lowering every kiln op (and `arith.constant`s of `ui8` tensors,
/// which folding can create) to linalg/tensor/arith/math.
void populateKilnToLinalgConversionPatterns(
    const KilnTypeConverter &typeConverter, RewritePatternSet &patterns);

/// The conversion target of `kiln-convert-to-linalg`: kiln illegal;
/// arith, linalg, math and tensor legal; function signatures, calls and
/// returns legal once their types are converted.
void configureKilnToLinalgTarget(ConversionTarget &target,
                                 const KilnTypeConverter &typeConverter);

} // namespace mlir::kiln

#endif // KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
