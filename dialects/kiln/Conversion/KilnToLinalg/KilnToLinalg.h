//===- KilnToLinalg.h - kiln to linalg conversion ---------------*- C++ -*-===//

#ifndef KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H
#define KILN_CONVERSION_KILNTOLINALG_KILNTOLINALG_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::kiln {

/// Dynamic-shape kernels (one kernel for a trace structure run at many
/// sizes): a function whose kiln values have dynamic extents carries
/// `kiln.dynamic_sizes = K : i64` and takes the K sizes as its trailing
/// `index` arguments; every kiln op whose result has dynamic extents carries
/// `kiln.sizes = array<i64: ...>`, per result axis the number of the size
/// it has (-1 for a static axis). The lowering builds every dynamic extent
/// from those arguments.
inline constexpr llvm::StringLiteral kDynamicSizesAttr = "kiln.dynamic_sizes";
inline constexpr llvm::StringLiteral kSizesAttr = "kiln.sizes";

/// kiln.index_add lowers to a `linalg.generic` that states its meaning
/// (result[.., v, ..] = input + the sum over j, in order, of source[.., j, ..]
/// where index[j] == v: loops over the result and, innermost, a reduction
/// over j) and carries `kiln.index_add = axis : i64`. A pipeline may run the
/// op it marks another way: the CPU one calls the runtime's scatter-add,
/// which visits only the indexed rows (kiln-cpu-matmul-to-runtime-calls);
/// fusion leaves it alone.
inline constexpr llvm::StringLiteral kIndexAddAttr = "kiln.index_add";

/// kiln.cumsum lowers the same way: a `linalg.generic` over the result and,
/// innermost, j along the axis (result[.., i, ..] = input[.., 0, ..], then
/// + input[.., j, ..] for 0 < j <= i in order) that carries
/// `kiln.cumsum = axis : i64`; the CPU pipeline calls the runtime's running
/// sum (input to result) instead.
inline constexpr llvm::StringLiteral kCumsumAttr = "kiln.cumsum";

/// Generics a pipeline may replace by a runtime call: fusion leaves them
/// alone.
inline bool isRuntimeCallGeneric(Operation *op) {
  return op->hasAttr(kIndexAddAttr) || op->hasAttr(kCumsumAttr);
}

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
