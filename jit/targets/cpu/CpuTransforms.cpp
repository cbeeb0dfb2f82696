//===- CpuTransforms.cpp - Kiln's own steps of the CPU pipeline -*- C++ -*-===//

#include "jit/targets/cpu/CpuTransforms.h"
#include "dialects/kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "dialects/kiln/IR/KilnAttributes.h"
#include "dialects/kiln/IR/KilnTypes.h"
#include "jit/targets/cpu/KernelArguments.h"
#include "jit/targets/cpu/MemoryExtent.h"
#include "jit/targets/cpu/Passes.h"
#include "jit/targets/cpu/RowScratch.h"
#include "jit/targets/cpu/ScratchLayout.h"
#include "runtime/exec/MatmulEpilogueFlags.h"
#include "runtime/exec/ParallelChunks.h"

#include <functional>

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {
constexpr int64_t kScratchAlignment = 64;
/// Innermost iterations below which a loop nest is not worth parallelising.
constexpr int64_t kMinParallelWork = 1 << 16;
constexpr const char *kMatmulFn = "kiln_rt_matmul_f32";
/// out[.., index[j], ..] += source[.., j, ..] in place (index_add): dtype,
/// rank, axis, n, kMaxCallRank extents, then out's, the index's and the
/// source's aligned pointer, offset and strides (kMaxCallRank, 1,
/// kMaxCallRank; element units).
constexpr const char *kIndexAddFn = "kiln_rt_index_add";
constexpr int64_t kMaxCallRank = 8;
constexpr int kIndexAddArgs = 4 + kMaxCallRank + (2 + kMaxCallRank) + 3 + (2 + kMaxCallRank);
/// out = input, then out[.., i, ..] += out[.., i - 1, ..] for i in order
/// (cumsum): dtype, rank, axis, kMaxCallRank extents, then out's and the
/// input's aligned pointer, offset and kMaxCallRank strides.
constexpr const char *kCumsumFn = "kiln_rt_cumsum";
constexpr int kCumsumArgs = 3 + kMaxCallRank + 2 * (2 + kMaxCallRank);
/// C = A * B (no read of C): used where C was zero-filled just before.
constexpr const char *kMatmulSetFn = "kiln_rt_matmul_set_f32";
/// C = relu?(((A * B * scale?) + bias?) + residual?): the f32 GEMM applying an
/// elementwise consumer to each tile as it finishes (see fusableEpilogue).
constexpr const char *kMatmulEpilogueFn = "kiln_rt_matmul_epilogue_f32";
/// The same with bf16 A and B, and C in f32 or rounded to bf16.
constexpr const char *kMatmulEpilogueBf16Fn = "kiln_rt_matmul_epilogue_bf16";
/// The same with bf16 A and B (an f32 C): the runtime's bf16 GEMM.
constexpr const char *kMatmulBf16Fn = "kiln_rt_matmul_bf16";
constexpr const char *kMatmulSetBf16Fn = "kiln_rt_matmul_set_bf16";
/// C = A * B (or C += A * B) with A and/or B stored as bf16 or f16: the f32
/// GEMM widening them as it packs them (see foldableHalfCast); flags
/// (MatmulEpilogueFlags.h) say which and whether C is added to.
constexpr const char *kMatmulWideningFn = "kiln_rt_matmul_widening_f32";
/// The runtime's implicit-GEMM convolution (runtime/interp/ConvKernels.cpp).
constexpr const char *kConvFn = "kiln_rt_conv2d_f32";

/// The zero fill of `c` right before `op`, if there is one.
linalg::FillOp zeroFillBefore(Operation *op, Value c) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (!fill || !fill.hasPureBufferSemantics() || fill.getDpsInits()[0] != c)
    return nullptr;
  auto value = fill.getDpsInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto zero = value ? dyn_cast<FloatAttr>(value.getValue()) : FloatAttr();
  return zero && zero.getValue().isPosZero() ? fill : nullptr;
}
constexpr const char *kParallelForFn = "kiln_rt_parallel_for";

int64_t elementBytes(Type t) {
  unsigned bits = t.getIntOrFloatBitWidth();
  return bits < 8 ? 1 : bits / 8;
}
} // namespace

LogicalResult assignScratch(func::FuncOp kernel, int64_t &scratchBytes, std::vector<int64_t> *dynamicScratch,
                            int64_t shareDistance) {
  scratchBytes = 0;
  if (dynamicScratch)
    dynamicScratch->clear();
  SmallVector<memref::AllocOp> allocs;
  kernel.walk([&](memref::AllocOp a) { allocs.push_back(a); });
  if (allocs.empty())
    return success();
  // Dynamic-shape kernels: the trailing index arguments are the sizes.
  Block &entry = kernel.getBody().front();
  unsigned firstSize = entry.getNumArguments();
  while (firstSize > 0 && entry.getArgument(firstSize - 1).getType().isIndex())
    --firstSize;
  /// `v` as a constant times a product of size arguments (their numbers
  /// appended to `sizes`); false when it is something else.
  std::function<bool(Value, int64_t &, SmallVector<int64_t> &)> decompose = [&](Value v, int64_t &factor,
                                                                                  SmallVector<int64_t> &sizes) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &entry || arg.getArgNumber() < firstSize)
        return false;
      sizes.push_back(arg.getArgNumber() - firstSize);
      return true;
    }
    if (std::optional<int64_t> c = getConstantIntValue(v)) {
      factor *= *c;
      return true;
    }
    if (auto mul = v.getDefiningOp<arith::MulIOp>())
      return decompose(mul.getLhs(), factor, sizes) && decompose(mul.getRhs(), factor, sizes);
    return false;
  };
  SmallVector<int64_t> offsets, slotBytes;
  SmallVector<memref::AllocOp> dynamicAllocs;
  for (memref::AllocOp a : allocs) {
    MemRefType type = a.getType();
    if (!type.getLayout().isIdentity())
      return a.emitError("kiln: only dense temporaries can live in scratch memory");
    if (a->getParentOp() != kernel.getOperation())
      return a.emitError("kiln: a temporary allocated inside a loop cannot share scratch memory");
    if (!type.hasStaticShape()) {
      if (!dynamicScratch)
        return a.emitError("kiln: only static temporaries can live in scratch memory");
      int64_t factor = 1;
      SmallVector<int64_t> sizes;
      for (Value size : a.getDynamicSizes())
        if (!decompose(size, factor, sizes))
          return a.emitError("kiln: a dynamic temporary must be sized by the kernel's dynamic sizes");
      dynamicAllocs.push_back(a);
      continue;
    }
    offsets.push_back(scratchBytes);
    // Temporaries of values too large to address (a splat of 2^62 elements
    // that was not fused away) fail the compile rather than wrap around.
    int64_t bytes = 0;
    if (__builtin_mul_overflow(type.getNumElements(), elementBytes(type.getElementType()), &bytes) ||
        bytes > INT64_MAX - kScratchAlignment ||
        __builtin_add_overflow(scratchBytes, (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment,
                               &scratchBytes))
      return a.emitError("kiln: the kernel's temporaries need more bytes than a 64-bit address space holds");
    slotBytes.push_back(bytes);
  }
  if (shareDistance >= 0 && offsets.size() > 1) {
    // Bytes of temporaries whose lives do not meet are shared (ScratchLayout.h);
    // never more bytes than one slot each, so the check above still bounds it.
    const llvm::DenseMap<Operation *, int64_t> position = scratchPositions(kernel);
    SmallVector<ScratchLife> lives;
    for (memref::AllocOp a : allocs)
      if (a.getType().hasStaticShape())
        lives.push_back(
            scratchLife(a.getResult(), slotBytes[lives.size()], position.lookup(a.getOperation()), kernel, position));
    std::vector<int64_t> shared = packScratch(lives, kScratchAlignment, shareDistance, scratchBytes);
    offsets.assign(shared.begin(), shared.end());
  }
  MLIRContext *ctx = kernel.getContext();
  auto scratchType = MemRefType::get({scratchBytes}, IntegerType::get(ctx, 8));
  unsigned argIndex = kernel.getNumArguments();
  (void)kernel.insertArgument(argIndex, scratchType, DictionaryAttr::get(ctx), kernel.getLoc());
  Value scratch = kernel.getArgument(argIndex);
  auto replace = [](memref::AllocOp a, Value view) {
    SmallVector<Operation *> deallocs;
    for (Operation *user : a->getUsers())
      if (isa<memref::DeallocOp>(user))
        deallocs.push_back(user);
    for (Operation *d : deallocs)
      d->erase();
    a.replaceAllUsesWith(view);
    a.erase();
  };
  SmallVector<memref::AllocOp> staticAllocs;
  for (memref::AllocOp a : allocs)
    if (a.getType().hasStaticShape())
      staticAllocs.push_back(a);
  for (auto [a, offset] : llvm::zip(staticAllocs, offsets)) {
    OpBuilder b(a);
    Value shift = arith::ConstantIndexOp::create(b, a.getLoc(), offset);
    replace(a, memref::ViewOp::create(b, a.getLoc(), a.getType(), scratch, shift, ValueRange{}));
  }
  // Dynamic temporaries follow the static ones; each takes
  // align(bytes * product of its sizes), which the runtime adds up from
  // `dynamicScratch`: per temporary, bytes, the number of sizes, the sizes.
  OpBuilder entryBuilder = OpBuilder::atBlockBegin(&entry);
  Value next = arith::ConstantIndexOp::create(entryBuilder, kernel.getLoc(), scratchBytes);
  for (memref::AllocOp a : dynamicAllocs) {
    MemRefType type = a.getType();
    OpBuilder b(a);
    Location loc = a.getLoc();
    int64_t bytes = elementBytes(type.getElementType());
    for (int64_t extent : type.getShape())
      if (!ShapedType::isDynamic(extent))
        bytes *= extent;
    int64_t factor = 1;
    SmallVector<int64_t> sizes;
    for (Value size : a.getDynamicSizes())
      (void)decompose(size, factor, sizes);
    dynamicScratch->push_back(bytes * factor);
    dynamicScratch->push_back(static_cast<int64_t>(sizes.size()));
    llvm::append_range(*dynamicScratch, sizes);
    Value total = arith::ConstantIndexOp::create(b, loc, bytes);
    for (Value size : a.getDynamicSizes())
      total = arith::MulIOp::create(b, loc, total, size);
    Value view = memref::ViewOp::create(b, loc, type, scratch, next, a.getDynamicSizes());
    Value align = arith::ConstantIndexOp::create(b, loc, kScratchAlignment);
    Value rounded = arith::CeilDivUIOp::create(b, loc, total, align);
    rounded = arith::MulIOp::create(b, loc, rounded, align);
    next = arith::AddIOp::create(b, loc, next, rounded);
    replace(a, view);
  }
  return success();
}

void makeResultsDistinct(func::FuncOp kernel) {
  kernel.walk([&](func::ReturnOp ret) {
    llvm::SmallPtrSet<Value, 8> seen;
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      auto type = dyn_cast<RankedTensorType>(v.getType());
      Operation *def = v.getDefiningOp();
      const bool needsCopy = !seen.insert(v).second || isa<BlockArgument>(v) ||
                             (def && def->hasTrait<OpTrait::ConstantLike>());
      if (!type || !needsCopy)
        continue;
      Value empty =
          tensor::EmptyOp::create(b, ret.getLoc(), tensor::getMixedSizes(b, ret.getLoc(), v), type.getElementType());
      Value copy = linalg::CopyOp::create(b, ret.getLoc(), v, empty).getResult(0);
      operand.set(copy);
    }
    // A result computed into a tensor.empty that other ops also write into
    // (CSE merges equal empties) gets an empty of its own. Otherwise
    // bufferization may use the output buffer as another op's temporary, and
    // the output could not be computed in place of a donated input (see
    // BufferDonation.h).
    for (Value v : ret->getOperands()) {
      auto result = dyn_cast<OpResult>(v);
      auto dps = result ? dyn_cast<DestinationStyleOpInterface>(result.getOwner()) : nullptr;
      OpOperand *init = dps ? dps.getTiedOpOperand(result) : nullptr;
      auto empty = init ? init->get().getDefiningOp<tensor::EmptyOp>() : nullptr;
      if (!empty || empty->hasOneUse())
        continue;
      OpBuilder eb(dps);
      init->set(eb.clone(*empty.getOperation())->getResult(0));
    }
  });
}

namespace {
/// (aligned pointer, offset, strides...) of a memref as i64 values.
SmallVector<Value> describe(OpBuilder &b, Location loc, Value memref, bool batched) {
  auto md = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  auto i64 = b.getI64Type();
  auto toI64 = [&](Value v) -> Value { return arith::IndexCastOp::create(b, loc, i64, v); };
  Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, md.getBaseBuffer());
  SmallVector<Value> out{toI64(ptr), toI64(md.getOffset())};
  auto strides = md.getStrides();
  if (batched) {
    out.push_back(toI64(strides[0]));
    out.push_back(toI64(strides[1]));
    out.push_back(toI64(strides[2]));
  } else {
    out.push_back(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
    out.push_back(toI64(strides[0]));
    out.push_back(toI64(strides[1]));
  }
  return out;
}
} // namespace

bool isRuntimeMatmulOperands(linalg::LinalgOp matmul) {
  auto elementOf = [](Value v) -> Type {
    auto t = dyn_cast<MemRefType>(v.getType());
    return t ? t.getElementType() : Type();
  };
  if (matmul->getNumOperands() != 3)
    return false;
  Type a = elementOf(matmul->getOperand(0)), b = elementOf(matmul->getOperand(1)),
       c = elementOf(matmul->getOperand(2));
  return a && c && c.isF32() && a == b && (a.isF32() || a.isBF16());
}

namespace {
/// An elementwise consumer of a matmul's result that the runtime's GEMM can
/// apply to each tile of C as it finishes:
/// out = bf16?(relu?(((c * scale?) + bias[j]?) + residual[i, j]?)).
struct FusableEpilogue {
  linalg::GenericOp op;
  /// c expanded to the consumer's rank ([M, N] as [..., N]), or null when
  /// the consumer reads c itself.
  memref::ExpandShapeOp expandedC;
  Value out;
  Value bias;      ///< rank 1, indexed by the column; null without a bias
  Value residual;  ///< C's shape, contiguous columns; null without one
  std::optional<float> scale;  ///< c * scale first (a constant)
  bool relu = false;
  bool roundToBf16 = false;  ///< out is bf16 (only after bf16 operands)
};

/// Is `v` the constant +-0.0?
bool isZeroConstant(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
  return f && f.getValue().isZero();
}

/// Is `v` the integer constant `n`?
bool isIntConstant(Value v, int64_t n) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  auto i = c ? dyn_cast<IntegerAttr>(c.getValue()) : IntegerAttr();
  return i && i.getValue().getSExtValue() == n;
}

/// The operand of the commutative `op` that is not `known` (null if neither
/// is).
Value otherOperand(Operation *op, Value known) {
  if (op->getOperand(0) == known)
    return op->getOperand(1);
  return op->getOperand(1) == known ? op->getOperand(0) : Value();
}

/// The f32 value `y` rounds when `y` is the kiln lowering's rounding to
/// bf16 (truncateToBf16 in KilnToLinalg's ScalarOps.cpp: to nearest even in
/// integers, NaN made quiet), with its 11 ops; else null.
Value bf16RoundingOf(Value y) {
  auto toBf16 = y.getDefiningOp<arith::BitcastOp>();
  auto trunc = toBf16 ? toBf16.getIn().getDefiningOp<arith::TruncIOp>() : arith::TruncIOp();
  auto select = trunc ? trunc.getIn().getDefiningOp<arith::SelectOp>() : arith::SelectOp();
  auto isNaN = select ? select.getCondition().getDefiningOp<arith::CmpFOp>() : arith::CmpFOp();
  if (!isNaN || isNaN.getPredicate() != arith::CmpFPredicate::UNO || isNaN.getLhs() != isNaN.getRhs() ||
      !isNaN.getLhs().getType().isF32() || !trunc.getType().isInteger(16))
    return {};
  const Value f = isNaN.getLhs();
  // NaN: the high half with the quiet bit, high = bits >> 16.
  auto quiet = select.getTrueValue().getDefiningOp<arith::OrIOp>();
  Value high = quiet && isIntConstant(quiet.getRhs(), 0x40) ? quiet.getLhs() : Value();
  auto highShift = high ? high.getDefiningOp<arith::ShRUIOp>() : arith::ShRUIOp();
  auto bits = highShift ? highShift.getLhs().getDefiningOp<arith::BitcastOp>() : arith::BitcastOp();
  if (!bits || bits.getIn() != f || !isIntConstant(highShift.getRhs(), 16))
    return {};
  // Otherwise (bits + ((high & 1) + 0x7fff)) >> 16.
  auto shift = select.getFalseValue().getDefiningOp<arith::ShRUIOp>();
  auto sum = shift && isIntConstant(shift.getRhs(), 16) ? shift.getLhs().getDefiningOp<arith::AddIOp>()
                                                          : arith::AddIOp();
  Value bias = sum ? otherOperand(sum, bits) : Value();
  auto biasSum = bias ? bias.getDefiningOp<arith::AddIOp>() : arith::AddIOp();
  if (!biasSum)
    return {};
  auto lsb = biasSum.getLhs().getDefiningOp<arith::AndIOp>();
  Value half = biasSum.getRhs();
  if (!lsb) {
    lsb = biasSum.getRhs().getDefiningOp<arith::AndIOp>();
    half = biasSum.getLhs();
  }
  if (!lsb || !isIntConstant(half, 0x7fff) || otherOperand(lsb, high) == Value() ||
      !isIntConstant(otherOperand(lsb, high), 1))
    return {};
  return f;
}

/// The consumer of `matmul`'s result `c`: the first op after it with memory
/// effects (views, reshapes and constants in between have none, so the
/// GEMM may as well run where the consumer is), when it is a linalg.generic.
linalg::GenericOp consumerAfter(linalg::MatmulOp matmul) {
  Operation *next = matmul->getNextNode();
  while (next && isMemoryEffectFree(next) && next->getNumRegions() == 0)
    next = next->getNextNode();
  return dyn_cast_or_null<linalg::GenericOp>(next);
}

/// [[0, ..., rank - 2], [rank - 1]]: the leading dimensions as C's rows.
SmallVector<ReassociationIndices> rowsThenColumns(int64_t rank) {
  ReassociationIndices rows;
  for (int64_t d = 0; d + 1 < rank; ++d)
    rows.push_back(d);
  return {rows, {rank - 1}};
}

/// Whether `v`, a memref of C's elements laid out over `rank` dimensions,
/// can be read as a 2-D matrix of its leading dimensions by its last
/// (contiguous columns, rows at one stride).
bool viewableAsMatrix(Value v, int64_t rank) {
  auto type = dyn_cast<MemRefType>(v.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return type && type.getRank() == rank && succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1 &&
         (rank == 2 || memref::CollapseShapeOp::isGuaranteedCollapsible(type, rowsThenColumns(rank)));
}

/// `v` (viewableAsMatrix) as a 2-D memref, built at `b`.
Value asMatrix(OpBuilder &b, Location loc, Value v) {
  const int64_t rank = cast<MemRefType>(v.getType()).getRank();
  return rank == 2 ? v : memref::CollapseShapeOp::create(b, loc, v, rowsThenColumns(rank)).getResult();
}

/// The consumer of `matmul` (consumerAfter) when it is the only reader of the matmul's
/// result `c` (a temporary C = A * B, zero-filled before), directly or as
/// an expand_shape of its rows ([M, N] as [..., N]), and computes
/// relu?(((c * scale?) + bias?) + residual?), with at least one of them
/// (the scale a constant), into a distinct f32 buffer whose columns are contiguous (the residual's too);
/// after bf16 operands (`bf16Operands`) also any of these, or c itself,
/// rounded into a bf16 buffer. The order of the additions is the payload's
/// (f32 sums are not associative), up to the operands of each.
std::optional<FusableEpilogue> fusableEpilogue(linalg::MatmulOp matmul, Value c, linalg::FillOp fill,
                                               bool bf16Operands, unsigned numInputs) {
  linalg::GenericOp g = consumerAfter(matmul);
  if (!fill || !g || !g.hasPureBufferSemantics() || g.getNumLoops() < 2 || g.getNumParallelLoops() != g.getNumLoops() ||
      g.getNumDpsInits() != 1 || g.getNumDpsInputs() < 1 || g.getNumDpsInputs() > 3)
    return std::nullopt;
  const int64_t rank = g.getNumLoops();
  MLIRContext *ctx = g.getContext();
  const AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  const AffineMap column = AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, ctx)}, ctx);
  FusableEpilogue e{g, memref::ExpandShapeOp(), g.getDpsInits()[0], Value(), Value(), std::nullopt, false};
  // What the consumer reads as C: c itself, or its rows expanded.
  Value cRead = c;
  if (rank > 2) {
    auto expanded = llvm::find_if(c.getUsers(), [](Operation *u) { return isa<memref::ExpandShapeOp>(u); });
    if (expanded == c.getUsers().end())
      return std::nullopt;
    e.expandedC = cast<memref::ExpandShapeOp>(*expanded);
    if (e.expandedC.getReassociationIndices() != rowsThenColumns(rank) || !e.expandedC->hasOneUse() ||
        *e.expandedC->user_begin() != g.getOperation())
      return std::nullopt;
    cRead = e.expandedC.getResult();
  }
  auto outType = dyn_cast<MemRefType>(e.out.getType());
  if (!outType || !(outType.getElementType().isF32() || (bf16Operands && outType.getElementType().isBF16())) ||
      g.getMatchingIndexingMap(g.getDpsInitOperand(0)) != identity || !viewableAsMatrix(e.out, rank))
    return std::nullopt;
  Block &body = g.getRegion().front();
  if (!body.getArguments().back().use_empty())
    return std::nullopt;  // the payload reads the output
  Value cArg, biasArg, residualArg;
  for (OpOperand *in : g.getDpsInputOperands()) {
    const AffineMap map = g.getMatchingIndexingMap(in);
    auto type = dyn_cast<MemRefType>(in->get().getType());
    if (!type || !type.getElementType().isF32())
      return std::nullopt;
    if (in->get() == cRead && map == identity && !cArg) {
      cArg = body.getArgument(in->getOperandNumber());
    } else if (map == column && type.getRank() == 1 && !biasArg) {
      biasArg = body.getArgument(in->getOperandNumber());
      e.bias = in->get();
    } else if (map == identity && !residualArg && viewableAsMatrix(in->get(), rank)) {
      residualArg = body.getArgument(in->getOperandNumber());
      e.residual = in->get();
    } else {
      return std::nullopt;
    }
  }
  if (!cArg)
    return std::nullopt;
  // The payload: [bf16 of] [relu of] [[c + bias] + residual], relu as
  // select(x < 0, 0, x) (the lowering's, NaN-preserving) or maximumf(x, 0).
  Value x = cast<linalg::YieldOp>(body.getTerminator()).getOperand(0);
  unsigned expectedOps = 1;  // the yield
  if (outType.getElementType().isBF16()) {
    x = bf16RoundingOf(x);
    if (!x)
      return std::nullopt;
    e.roundToBf16 = true;
    expectedOps += 11;
  }
  if (auto sel = x.getDefiningOp<arith::SelectOp>()) {
    auto cmp = sel.getCondition().getDefiningOp<arith::CmpFOp>();
    if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::OLT || cmp.getLhs() != sel.getFalseValue() ||
        !isZeroConstant(cmp.getRhs()) || !isZeroConstant(sel.getTrueValue()))
      return std::nullopt;
    x = sel.getFalseValue();
    e.relu = true;
    expectedOps += 2;
  } else if (auto max = x.getDefiningOp<arith::MaximumFOp>(); max && isZeroConstant(max.getRhs())) {
    x = max.getLhs();
    e.relu = true;
    expectedOps += 1;
  }
  // x = rest + arg (either order): x becomes rest; false if x is no such sum.
  auto peelAdd = [&](Value arg) {
    auto add = x.getDefiningOp<arith::AddFOp>();
    Value rest = add ? otherOperand(add, arg) : Value();
    if (!rest)
      return false;
    x = rest;
    expectedOps += 1;
    return true;
  };
  if ((residualArg && !peelAdd(residualArg)) || (biasArg && !peelAdd(biasArg)))
    return std::nullopt;
  // c * scale by a constant (an attention score's 1 / sqrt(d), a loss scale).
  if (auto mul = x.getDefiningOp<arith::MulFOp>(); mul && x != cArg) {
    Value scale = otherOperand(mul, cArg);
    auto constant = scale ? scale.getDefiningOp<arith::ConstantOp>() : arith::ConstantOp();
    auto value = constant ? dyn_cast<FloatAttr>(constant.getValue()) : FloatAttr();
    if (!value || !value.getType().isF32())
      return std::nullopt;
    e.scale = value.getValue().convertToFloat();
    x = cArg;
    expectedOps += 1;
  }
  // Constants the payload uses may sit inside it.
  for (Operation &op : body.without_terminator())
    if (isa<arith::ConstantOp>(op))
      ++expectedOps;
  if (x != cArg || !(e.relu || e.bias || e.residual || e.scale || e.roundToBf16) ||
      body.getOperations().size() != expectedOps)
    return std::nullopt;
  // c is read by nothing else, and is a temporary or the consumer's own
  // output (computed in place): the fused call writes only the output, so a
  // kernel output (a function argument) that is not also the consumer's
  // would keep whatever its bytes held (the fuzzer's seed 5194 returned
  // matmul(a, b) and relu of it: the product came back as garbage). The GEMM
  // may write out while it reads A, B and the bias: disjoint bytes (distinct
  // buffers, or distinct ranges of the scratch), none shared with another
  // argument. The residual may share the output's bytes (a dead temporary's
  // range reused, a donated input): the runtime then reads it from a copy.
  if (!isa_and_nonnull<memref::AllocOp, memref::ViewOp>(c.getDefiningOp()) && e.out != cRead)
    return std::nullopt;
  for (Operation *user : c.getUsers())
    if (user != matmul.getOperation() && user != g.getOperation() && user != fill.getOperation() &&
        user != e.expandedC.getOperation() && !isa<memref::DeallocOp>(user))
      return std::nullopt;
  const Extent outExtent = extentOf(e.out);
  const Value outBuffer = outExtent.base;
  for (Value v : {matmul.getDpsInputs()[0], matmul.getDpsInputs()[1], e.bias})
    if (v && !disjoint(extentOf(v), outExtent))
      return std::nullopt;
  // An output that may be given an input's buffer (buffer donation): only
  // when that input can only be the residual, whose elements the runtime
  // reads before C's (it copies a residual that shares C's buffer first).
  auto fn = g->getParentOfType<func::FuncOp>();
  if (auto arg = dyn_cast<BlockArgument>(outBuffer); arg && fn)
    if (auto shared = fn->getAttrOfType<DenseI64ArrayAttr>(kSharedArgsAttr))
      if (llvm::is_contained(shared.asArrayRef(), static_cast<int64_t>(arg.getArgNumber()))) {
        auto residual = e.residual ? dyn_cast<BlockArgument>(e.residual) : BlockArgument();
        auto donations = fn->getAttrOfType<ArrayAttr>(kDonationsAttr);
        if (!residual || numInputs == 0 || !donations)
          return std::nullopt;
        for (auto pair : donations.getAsRange<DenseI64ArrayAttr>()) {
          if (pair.asArrayRef()[0] + numInputs != arg.getArgNumber())
            continue;
          if (pair.asArrayRef()[1] != static_cast<int64_t>(residual.getArgNumber()))
            return std::nullopt;
          // The runtime copies only the residual first: a donated input that
          // is also A, B or the bias (relu(x @ w + x) with x's buffer given
          // to the result) would be overwritten by early tiles while later
          // tiles still read it (found by review; 6 steps of that loop on
          // 256 x 256 drifted 2.4 from the interpreter).
          for (Value v : {matmul.getDpsInputs()[0], matmul.getDpsInputs()[1], e.bias})
            if (v && extentOf(v).base == residual)
              return std::nullopt;
        }
      }
  return e;
}
} // namespace

namespace {
/// A cast from f16 or bf16 that writes an f32 matmul operand (foldableHalfCast).
struct FoldableCast {
  linalg::GenericOp cast;
  Value source;  ///< the half buffer
  bool bf16;     ///< its element type: bf16, else f16
  /// The matmul reads the cast's result with its rows collapsed (else null).
  memref::CollapseShapeOp collapse;
};

/// The half value `y` widens to f32 in the kiln lowering (ScalarBuilder::
/// toCompute: arith.extf from f16, or bf16's bits shifted into the f32's
/// high half), with the payload's ops it takes (`ops`); null otherwise.
Value widenedHalf(Value y, unsigned &ops) {
  if (auto ext = y.getDefiningOp<arith::ExtFOp>(); ext && ext.getIn().getType().isF16() && y.getType().isF32()) {
    ops = 1;
    return ext.getIn();
  }
  auto toF32 = y.getDefiningOp<arith::BitcastOp>();
  auto shift = toF32 && y.getType().isF32() ? toF32.getIn().getDefiningOp<arith::ShLIOp>() : arith::ShLIOp();
  auto wide = shift && isIntConstant(shift.getRhs(), 16) ? shift.getLhs().getDefiningOp<arith::ExtUIOp>()
                                                           : arith::ExtUIOp();
  auto bits = wide ? wide.getIn().getDefiningOp<arith::BitcastOp>() : arith::BitcastOp();
  if (!bits || !bits.getIn().getType().isBF16())
    return {};
  ops = 4;
  return bits.getIn();
}


/// Does `op` write every element of `buffer` without reading it first (a
/// fill, or an elementwise generic into it that ignores its old values)?
bool overwritesWhole(Operation *op, Value buffer) {
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.getDpsInits()[0] == buffer;
  auto g = dyn_cast<linalg::GenericOp>(op);
  if (!g || g.getNumDpsInits() != 1 || g.getDpsInits()[0] != buffer || g.getNumParallelLoops() != g.getNumLoops() ||
      !g.getMatchingIndexingMap(g.getDpsInitOperand(0)).isIdentity())
    return false;
  for (OpOperand *in : g.getDpsInputOperands())
    if (in->get() == buffer)
      return false;
  return g.getRegion().front().getArguments().back().use_empty();
}

/// The cast that writes operand `index` of `matmul` (an f32 matmul into
/// `c`) when the runtime's GEMM can widen its source as it packs it instead
/// (kiln_rt_matmul_widening_f32): a linalg.generic widening a bf16 or f16
/// buffer of the operand's shape elementwise into a temporary that the
/// matmul reads (itself, or its rows collapsed: a batch over a shared
/// weight). The cast is the temporary's last use before the matmul; after
/// it, nothing reads the temporary before overwriting it whole (scratch
/// ranges are reused: the same view may hold several temporaries in turn).
/// Between the cast and the matmul come only ops without memory effects,
/// allocations, C's zero fill and the other operand's cast; neither what
/// they write nor the matmul's C may overlap the source (mayOverlap: the
/// product now reads the source where the matmul is). The other operand is
/// not the same temporary.
std::optional<FoldableCast> foldableHalfCast(linalg::LinalgOp matmul, unsigned index, Value c) {
  Value operand = matmul->getOperand(index);
  auto collapse = operand.getDefiningOp<memref::CollapseShapeOp>();
  if (collapse && !collapse->hasOneUse())
    return std::nullopt;
  Value temp = collapse ? collapse.getSrc() : operand;
  if (!isa_and_nonnull<memref::AllocOp, memref::ViewOp>(temp.getDefiningOp()))
    return std::nullopt;
  // The other operand: itself, or the buffer it collapses.
  Value other = matmul->getOperand(1 - index);
  if (auto otherCollapse = other.getDefiningOp<memref::CollapseShapeOp>())
    other = otherCollapse.getSrc();
  if (other == temp)
    return std::nullopt;  // cast(x) @ cast(x): the other read would lose its writer
  for (Operation *user : temp.getUsers())
    if (user->getBlock() != matmul->getBlock() ||
        (isa<ViewLikeOpInterface>(user) && user != collapse.getOperation()))
      return std::nullopt;
  auto uses = [&](Operation *op) { return llvm::is_contained(op->getOperands(), temp); };
  linalg::GenericOp g;
  for (Operation *op = matmul->getPrevNode(); op; op = op->getPrevNode())
    if (op != collapse.getOperation() && uses(op)) {
      g = dyn_cast<linalg::GenericOp>(op);
      break;
    }
  if (!g || g.getNumDpsInits() != 1 || g.getDpsInits()[0] != temp || !g.hasPureBufferSemantics() ||
      g.getNumDpsInputs() != 1 || g.getNumParallelLoops() != g.getNumLoops())
    return std::nullopt;
  for (Operation *op = matmul->getNextNode(); op; op = op->getNextNode()) {
    if (!uses(op))
      continue;
    if (isa<memref::DeallocOp>(op) || overwritesWhole(op, temp))
      break;
    return std::nullopt;
  }
  Value source = g.getDpsInputs()[0];
  auto sourceType = dyn_cast<MemRefType>(source.getType());
  auto tempType = cast<MemRefType>(temp.getType());
  if (!sourceType || !(sourceType.getElementType().isBF16() || sourceType.getElementType().isF16()) ||
      sourceType.getShape() != tempType.getShape() ||
      (collapse &&
       !memref::CollapseShapeOp::isGuaranteedCollapsible(sourceType, collapse.getReassociationIndices())))
    return std::nullopt;
  for (AffineMap map : g.getIndexingMapsArray())
    if (!map.isIdentity())
      return std::nullopt;
  Block &body = g.getRegion().front();
  unsigned ops = 0;
  Value widened = widenedHalf(cast<linalg::YieldOp>(body.getTerminator()).getOperand(0), ops);
  if (widened != body.getArgument(0))
    return std::nullopt;
  unsigned payloadOps = 1;  // the yield
  for (Operation &op : body.without_terminator())
    if (!isa<arith::ConstantOp>(op))
      ++payloadOps;
  if (payloadOps != ops + 1)
    return std::nullopt;
  // What runs between the cast and the matmul, and what it writes.
  SmallVector<Value> written{c};
  for (Operation *op = g->getNextNode(); op != matmul.getOperation(); op = op->getNextNode()) {
    if ((isMemoryEffectFree(op) && op->getNumRegions() == 0) || isa<memref::AllocOp>(op))
      continue;  // (an allocation writes no bytes the source may have)
    if (auto fill = dyn_cast<linalg::FillOp>(op); fill && fill.getDpsInits()[0] == c)
      continue;
    auto otherCast = dyn_cast<linalg::GenericOp>(op);
    if (!otherCast || otherCast.getNumDpsInits() != 1 || otherCast.getDpsInits()[0] != other)
      return std::nullopt;
    written.push_back(other);
  }
  auto fn = matmul->getParentOfType<func::FuncOp>();
  const std::set<unsigned> sharedArgs = fn ? sharedArgsOf(fn) : std::set<unsigned>{};
  for (Value w : written)
    if (mayOverlap(w, source, fn, sharedArgs))
      return std::nullopt;
  return FoldableCast{g, source, sourceType.getElementType().isBF16(), collapse};
}
} // namespace

namespace {
/// Erases the temporary `temp` (an alloc or a view) with its deallocations
/// when nothing else uses it any more.
void eraseIfOnlyDeallocated(Value temp) {
  Operation *def = temp.getDefiningOp();
  if (!isa_and_nonnull<memref::AllocOp, memref::ViewOp>(def) ||
      !llvm::all_of(temp.getUsers(), [](Operation *u) { return isa<memref::DeallocOp>(u); }))
    return;
  for (Operation *u : llvm::make_early_inc_range(temp.getUsers()))
    u->erase();
  def->erase();
}
} // namespace

LogicalResult matmulToRuntimeCalls(ModuleOp module, unsigned numInputs) {
  SmallVector<linalg::LinalgOp> matmuls;
  module.walk([&](linalg::LinalgOp op) {
    if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op.getOperation()) || !op.hasPureBufferSemantics())
      return;
    if (auto m = dyn_cast<linalg::MatmulOp>(op.getOperation()); m && m.hasUserDefinedMaps())
      return;
    if (auto m = dyn_cast<linalg::BatchMatmulOp>(op.getOperation()); m && m.hasUserDefinedMaps())
      return;
    if (!isRuntimeMatmulOperands(op))
      return;
    matmuls.push_back(op);
  });
  if (matmuls.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  auto i64 = IntegerType::get(ctx, 64);
  auto declare = [&](const char *fn, int numArgs = 19) {
    if (module.lookupSymbol(fn))
      return;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    SmallVector<Type> args(numArgs, i64);
    auto decl = func::FuncOp::create(b, module.getLoc(), fn, FunctionType::get(ctx, args, {}));
    decl.setPrivate();
  };
  for (linalg::LinalgOp op : matmuls) {
    Location loc = op.getLoc();
    const bool batched = isa<linalg::BatchMatmulOp>(op.getOperation());
    Value a = op.getDpsInputs()[0], bm = op.getDpsInputs()[1], c = op.getDpsInits()[0];
    // C = 0 then C += A*B is C = A*B: one pass over C instead of three.
    // (Looked up before the call's operands are built in between.)
    linalg::FillOp fill = zeroFillBefore(op, c);
    auto cType = cast<MemRefType>(c.getType());
    auto aType = cast<MemRefType>(a.getType());
    // f32 operands that are casts from f16 or bf16: the GEMM reads the half
    // buffers and widens them as it packs them (no f32 copy, no pass of its
    // own). C's columns must be contiguous (the widening entry's contract).
    int64_t storageFlags = 0;
    SmallVector<int64_t> cStrides;
    int64_t cOffset;
    if (aType.getElementType().isF32() && succeeded(cType.getStridesAndOffset(cStrides, cOffset)) &&
        cStrides.back() == 1) {
      using namespace ::kiln::exec;
      for (unsigned index : {0u, 1u}) {
        std::optional<FoldableCast> folded = foldableHalfCast(op, index, c);
        if (!folded)
          continue;
        Value temp = folded->cast.getDpsInits()[0];
        Value source = folded->source;
        if (folded->collapse) {
          OpBuilder cb(op);
          source = memref::CollapseShapeOp::create(cb, loc, source, folded->collapse.getReassociationIndices());
        }
        op->setOperand(index, source);
        if (folded->collapse)
          folded->collapse->erase();
        folded->cast->erase();
        eraseIfOnlyDeallocated(temp);
        storageFlags |= index == 0 ? (folded->bf16 ? kOperandABf16 : kOperandAF16)
                                   : (folded->bf16 ? kOperandBBf16 : kOperandBF16);
      }
      a = op.getDpsInputs()[0];
      bm = op.getDpsInputs()[1];
    }
    // An f32 scale / bias add / residual add / ReLU, or a rounding to bf16,
    // reading only this result: into its output, in the GEMM's tile store (one pass
    // over C instead of two, and no f32 C at all for a bf16 result). The
    // call then runs where the consumer ran (its output may be a view made
    // after the matmul).
    const bool bf16 = aType.getElementType().isBF16();
    std::optional<FusableEpilogue> epilogue;
    if (auto plain = dyn_cast<linalg::MatmulOp>(op.getOperation()))
      epilogue = fusableEpilogue(plain, c, fill, bf16, numInputs);
    OpBuilder b(epilogue ? epilogue->op.getOperation() : op.getOperation());
    const int r = cType.getRank();
    auto konst = [&](int64_t v) -> Value { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); };
    // Extents as i64: constants, or memref.dim in dynamic-shape kernels.
    auto extent = [&](Value v, MemRefType type, int64_t d) -> Value {
      if (!type.isDynamicDim(d))
        return konst(type.getDimSize(d));
      Value dim = memref::DimOp::create(b, loc, v, d);
      return arith::IndexCastOp::create(b, loc, b.getI64Type(), dim);
    };
    SmallVector<Value> args{batched ? extent(c, cType, 0) : konst(1), extent(c, cType, r - 2),
                            extent(c, cType, r - 1), extent(a, aType, r - 1)};
    if (epilogue) {
      // An output or residual of the consumer's rank ([..., N]) as C's
      // [M, N] matrix.
      for (Value v : {a, bm, asMatrix(b, loc, epilogue->out)})
        llvm::append_range(args, describe(b, loc, v, false));
      // The bias's pointer, offset and stride, then the residual's pointer,
      // offset and row stride (its columns are contiguous); zeros for none.
      for (Value v : {epilogue->bias, epilogue->residual ? asMatrix(b, loc, epilogue->residual) : Value()}) {
        if (!v) {
          args.append({konst(0), konst(0), konst(0)});
          continue;
        }
        auto md = memref::ExtractStridedMetadataOp::create(b, loc, v);
        Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, md.getBaseBuffer());
        for (Value x : {ptr, Value(md.getOffset()), Value(md.getStrides()[0])})
          args.push_back(arith::IndexCastOp::create(b, loc, b.getI64Type(), x));
      }
      // The scale's f32 bits.
      args.push_back(konst(epilogue->scale ? static_cast<int64_t>(llvm::bit_cast<uint32_t>(*epilogue->scale)) : 0));
      using namespace ::kiln::exec;
      args.push_back(konst((epilogue->bias ? kEpilogueBias : 0) | (epilogue->relu ? kEpilogueRelu : 0) |
                           (epilogue->roundToBf16 ? kEpilogueRoundToBf16 : 0) |
                           (epilogue->residual ? kEpilogueResidual : 0) | (epilogue->scale ? kEpilogueScale : 0) |
                           storageFlags));
      const char *fn = bf16 ? kMatmulEpilogueBf16Fn : kMatmulEpilogueFn;
      declare(fn, 27);
      func::CallOp::create(b, loc, fn, TypeRange{}, args);
      epilogue->op->erase();
      if (epilogue->expandedC)
        epilogue->expandedC->erase();
      op->erase();
      fill->erase();
      // The temporary C is left unused (but for its deallocations).
      eraseIfOnlyDeallocated(c);
      continue;
    }
    for (Value v : {a, bm, c})
      llvm::append_range(args, describe(b, loc, v, batched));
    if (storageFlags) {
      args.push_back(konst(storageFlags | (fill ? 0 : ::kiln::exec::kMatmulAccumulate)));
      declare(kMatmulWideningFn, 20);
      func::CallOp::create(b, loc, kMatmulWideningFn, TypeRange{}, args);
      op->erase();
      if (fill)
        fill->erase();
      continue;
    }
    const char *fn = bf16 ? (fill ? kMatmulSetBf16Fn : kMatmulBf16Fn) : (fill ? kMatmulSetFn : kMatmulFn);
    declare(fn);
    func::CallOp::create(b, loc, fn, TypeRange{}, args);
    op->erase();
    if (fill)
      fill->erase();
  }
  return success();
}

namespace {
/// kiln::DType's number of a buffer's element type (ui8 arrives as i8, which
/// adds alike); -1 for one the runtime's scatter-add does not take (bool).
int64_t runtimeDTypeOf(Type t) {
  std::optional<::kiln::DType> dtype = mlir::kiln::getDType(t);
  if (!dtype || *dtype == ::kiln::DType::boolean)
    return -1;
  return static_cast<int64_t>(*dtype);
}
} // namespace

LogicalResult runtimeCallGenericsToCalls(ModuleOp module) {
  // Generics marked kIndexAddAttr (inputs index and source; out already
  // holds the input) or kCumsumAttr (the input), each over a buffer the
  // runtime takes.
  SmallVector<linalg::GenericOp> calls;
  module.walk([&](linalg::GenericOp g) {
    const bool add = g->hasAttr(mlir::kiln::kIndexAddAttr), scan = g->hasAttr(mlir::kiln::kCumsumAttr);
    if ((!add && !scan) || !g.hasPureBufferSemantics() || g.getNumDpsInputs() != (add ? 2 : 1) ||
        g.getNumDpsInits() != 1)
      return;
    auto out = dyn_cast<MemRefType>(g.getDpsInits()[0].getType());
    if (!out || out.getRank() > kMaxCallRank || runtimeDTypeOf(out.getElementType()) < 0)
      return;
    calls.push_back(g);
  });
  if (calls.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  auto declare = [&](const char *name, int count) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    SmallVector<Type> args(count, IntegerType::get(ctx, 64));
    func::FuncOp::create(b, module.getLoc(), name, FunctionType::get(ctx, args, {})).setPrivate();
  };
  for (linalg::GenericOp g : calls) {
    OpBuilder b(g);
    Location loc = g.getLoc();
    const bool add = g->hasAttr(mlir::kiln::kIndexAddAttr);
    Value out = g.getDpsInits()[0];
    auto outType = cast<MemRefType>(out.getType());
    const int64_t rank = outType.getRank();
    auto konst = [&](int64_t v) -> Value { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); };
    auto toI64 = [&](Value v) -> Value { return arith::IndexCastOp::create(b, loc, b.getI64Type(), v); };
    auto extent = [&](Value v, int64_t d) -> Value {
      auto type = cast<MemRefType>(v.getType());
      if (!type.isDynamicDim(d))
        return konst(type.getDimSize(d));
      return toI64(memref::DimOp::create(b, loc, v, d));
    };
    // Pointer, offset and kMaxCallRank strides (or `rank` of them: the index's one).
    auto describeBuffer = [&](Value v, SmallVector<Value> &args, int64_t strides) {
      auto md = memref::ExtractStridedMetadataOp::create(b, loc, v);
      args.push_back(toI64(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, md.getBaseBuffer())));
      args.push_back(toI64(md.getOffset()));
      for (int64_t d = 0; d < strides; ++d)
        args.push_back(d < static_cast<int64_t>(md.getStrides().size()) ? toI64(md.getStrides()[d]) : konst(0));
    };
    const int64_t axis =
        g->getAttrOfType<IntegerAttr>(add ? mlir::kiln::kIndexAddAttr : mlir::kiln::kCumsumAttr).getInt();
    SmallVector<Value> args{konst(runtimeDTypeOf(outType.getElementType())), konst(rank), konst(axis)};
    if (add)
      args.push_back(extent(g.getDpsInputs()[0], 0));
    for (int64_t d = 0; d < kMaxCallRank; ++d)
      args.push_back(d < rank ? extent(out, d) : konst(1));
    describeBuffer(out, args, kMaxCallRank);
    if (add) {
      describeBuffer(g.getDpsInputs()[0], args, 1);
      describeBuffer(g.getDpsInputs()[1], args, kMaxCallRank);
    } else {
      describeBuffer(g.getDpsInputs()[0], args, kMaxCallRank);
    }
    const char *fn = add ? kIndexAddFn : kCumsumFn;
    declare(fn, add ? kIndexAddArgs : kCumsumArgs);
    func::CallOp::create(b, loc, fn, TypeRange{}, args);
    g->erase();
  }
  return success();
}

namespace {
/// A convolution input that is a zero-padded copy: a fresh buffer filled with
/// zeros (linalg.map or linalg.fill) into whose interior one memref.copy
/// writes `source` (what tensor.pad bufferizes to).
struct PaddedInput {
  Value source;
  int64_t top = 0, left = 0, bottom = 0, right = 0;
  SmallVector<Operation *> ops;  ///< the copy, subview, fill and alloc, to erase
};

/// Whether `from` precedes `to` in one block and no operation between them
/// (nested ones included) may write a byte of `source`: each one's memory
/// effects are known and none is a write to a memref that may overlap it
/// (donated arguments counted as one buffer, MemoryExtent.h).
bool sourceUnwrittenBetween(Value source, Operation *from, Operation *to) {
  if (from->getBlock() != to->getBlock() || !from->isBeforeInBlock(to))
    return false;
  auto fn = to->getParentOfType<func::FuncOp>();
  const std::set<unsigned> sharedArgs = fn ? sharedArgsOf(fn) : std::set<unsigned>{};
  for (Operation *op = from->getNextNode(); op != to; op = op->getNextNode())
    if (mayWriteBytesOf(op, source, fn, sharedArgs))
      return false;
  return true;
}

std::optional<PaddedInput> paddedInput(Value x, Operation *conv) {
  auto alloc = x.getDefiningOp<memref::AllocOp>();
  if (!alloc)
    return std::nullopt;
  Operation *fill = nullptr;
  memref::SubViewOp sub;
  for (Operation *user : alloc->getUsers()) {
    if (user == conv)
      continue;
    if (auto m = dyn_cast<linalg::MapOp>(user); m && !fill && m.getInputs().empty()) {
      auto yield = dyn_cast<linalg::YieldOp>(m.getMapper().front().getTerminator());
      if (!yield || yield.getNumOperands() != 1 || !isZeroConstant(yield.getOperand(0)))
        return std::nullopt;
      fill = m;
      continue;
    }
    if (auto f = dyn_cast<linalg::FillOp>(user); f && !fill && isZeroConstant(f.getDpsInputs()[0])) {
      fill = f;
      continue;
    }
    if (auto sv = dyn_cast<memref::SubViewOp>(user); sv && !sub) {
      sub = sv;
      continue;
    }
    return std::nullopt;
  }
  if (!fill || !sub || !sub->hasOneUse())
    return std::nullopt;
  auto copy = dyn_cast<memref::CopyOp>(*sub->getUsers().begin());
  if (!copy || copy.getTarget() != sub.getResult() || !sub.hasUnitStride())
    return std::nullopt;
  // The call reads the source where the convolution stood, not where the
  // copy did: only sound if nothing in between may write the source.
  if (!sourceUnwrittenBetween(copy.getSource(), copy, conv))
    return std::nullopt;
  // Padding only on the two spatial axes (the last two of five).
  ArrayRef<int64_t> offsets = sub.getStaticOffsets(), sizes = sub.getStaticSizes();
  ArrayRef<int64_t> full = alloc.getType().getShape();
  if (offsets.size() != 5 || ShapedType::isDynamicShape(offsets) || ShapedType::isDynamicShape(sizes))
    return std::nullopt;
  for (int d = 0; d < 3; ++d)
    if (offsets[d] != 0 || sizes[d] != full[d])
      return std::nullopt;
  PaddedInput p;
  p.source = copy.getSource();
  p.top = offsets[3];
  p.left = offsets[4];
  p.bottom = full[3] - sizes[3] - offsets[3];
  p.right = full[4] - sizes[4] - offsets[4];
  p.ops = {copy, sub, fill, alloc};
  return p;
}
} // namespace

namespace {
/// The zero fill of a convolution's output `out`: the one just before
/// `conv`, or, when `out` is a fresh allocation, an earlier one in the same
/// block with no other use of the allocation (or of a view of it) between
/// them (CSE and hoisting may move the fill away).
linalg::FillOp zeroFilledOutput(Operation *conv, Value out) {
  if (linalg::FillOp fill = zeroFillBefore(conv, out))
    return fill;
  auto alloc = out.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != conv->getBlock())
    return nullptr;
  // Every operation using the buffer, through views.
  llvm::SmallPtrSet<Operation *, 16> users;
  SmallVector<Value> work{alloc.getResult()};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!users.insert(user).second)
        continue;
      if (isa<ViewLikeOpInterface>(user))
        for (Value r : user->getResults())
          work.push_back(r);
    }
  }
  linalg::FillOp fill;
  for (Operation *op = conv->getPrevNode(); op; op = op->getPrevNode()) {
    if (!users.count(op)) {
      if (op->getNumRegions() > 0 && llvm::any_of(users, [&](Operation *u) { return op->isProperAncestor(u); }))
        return nullptr;  // used inside a region in between
      continue;
    }
    if (isa<ViewLikeOpInterface>(op))
      continue;  // taking a view reads and writes nothing
    auto f = dyn_cast<linalg::FillOp>(op);
    if (f && f.hasPureBufferSemantics() && f.getDpsInits()[0] == out && isZeroConstant(f.getDpsInputs()[0]))
      fill = f;
    break;
  }
  return fill;
}
} // namespace

LogicalResult convToRuntimeCalls(ModuleOp module) {
  SmallVector<linalg::Conv2DNgchwGfchwOp> convs;
  module.walk([&](linalg::Conv2DNgchwGfchwOp op) {
    if (!op.hasPureBufferSemantics())
      return;
    for (Value v : op->getOperands()) {
      auto t = dyn_cast<MemRefType>(v.getType());
      if (!t || !t.getElementType().isF32() || !t.hasStaticShape())
        return;
    }
    convs.push_back(op);
  });
  if (convs.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  constexpr unsigned kArgs = 3 * 7 + 10 + 4 + 4 + 1;
  if (!module.lookupSymbol(kConvFn)) {
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    SmallVector<Type> args(kArgs, IntegerType::get(ctx, 64));
    auto decl = func::FuncOp::create(b, module.getLoc(), kConvFn, FunctionType::get(ctx, args, {}));
    decl.setPrivate();
  }
  // The runtime pads while it unfolds: each convolution reads its unpadded
  // input directly. Found before any rewrite: a call has no memory effects
  // to check, so another convolution's call between a copy and its
  // convolution would keep the copy.
  SmallVector<std::optional<PaddedInput>> paddings;
  for (linalg::Conv2DNgchwGfchwOp op : convs)
    paddings.push_back(paddedInput(op.getDpsInputs()[0], op));
  for (auto [op, padded] : llvm::zip_equal(convs, paddings)) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value x = op.getDpsInputs()[0], w = op.getDpsInputs()[1], out = op.getDpsInits()[0];
    linalg::FillOp fill = zeroFilledOutput(op, out);
    if (padded)
      x = padded->source;
    auto i64 = b.getI64Type();
    auto konst = [&](int64_t v) -> Value { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); };
    auto toI64 = [&](Value v) -> Value { return arith::IndexCastOp::create(b, loc, i64, v); };
    SmallVector<Value> args;
    // Per operand: aligned pointer, offset, the five strides (elements).
    for (Value v : {x, w, out}) {
      auto md = memref::ExtractStridedMetadataOp::create(b, loc, v);
      args.push_back(toI64(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, md.getBaseBuffer())));
      args.push_back(toI64(md.getOffset()));
      for (Value stride : md.getStrides())
        args.push_back(toI64(stride));
    }
    // [N, G, C/G, H, W] x [G, Co/G, C/G, kH, kW] -> [N, G, Co/G, Ho, Wo]:
    // N, G, C/G, H, W (unpadded), Co/G, kH, kW, Ho, Wo, then strides,
    // dilations, paddings (top, left, bottom, right).
    ArrayRef<int64_t> xs = cast<MemRefType>(x.getType()).getShape();
    ArrayRef<int64_t> ws = cast<MemRefType>(w.getType()).getShape();
    ArrayRef<int64_t> os = cast<MemRefType>(out.getType()).getShape();
    for (int64_t v : {xs[0], xs[1], xs[2], xs[3], xs[4], ws[1], ws[3], ws[4], os[3], os[4]})
      args.push_back(konst(v));
    auto strides = op.getStrides().getValues<int64_t>();
    auto dilations = op.getDilations().getValues<int64_t>();
    for (int64_t v : {strides[0], strides[1], dilations[0], dilations[1]})
      args.push_back(konst(v));
    for (int64_t v : {padded ? padded->top : 0, padded ? padded->left : 0, padded ? padded->bottom : 0,
                      padded ? padded->right : 0})
      args.push_back(konst(v));
    args.push_back(konst(fill ? 0 : 1));  // accumulate into the output?
    func::CallOp::create(b, loc, kConvFn, TypeRange{}, args);
    op->erase();
    if (fill)
      fill->erase();
    if (padded)
      for (Operation *dead : padded->ops)
        dead->erase();
  }
  return success();
}

namespace {
/// Marks the divisions the tanh approximation creates (its p/q, over inputs
/// clamped to [-8, 8]: finite, q far from 0) `arcp ninf contract`, so that
/// LLVM divides by a reciprocal estimate and a Newton step (vrcp14ps and
/// FMAs, which `contract` allows: without it the step took four separate
/// multiplies and subtractions; within an ulp, inside the polynomial's own
/// error) instead of vdivps, whose throughput bounds tanh-heavy loops
/// (chain8). Other divisions, the user's above all, stay IEEE divisions.
struct TanhDivisions : RewriterBase::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (auto div = dyn_cast<arith::DivFOp>(op))
      div.setFastmath(div.getFastmath() | arith::FastMathFlags::arcp | arith::FastMathFlags::ninf | arith::FastMathFlags::contract);
  }
};
} // namespace

/// f32 exp by Cody-Waite reduction (k = round(x / ln 2), as upstream's
/// approximation) and a degree-6 polynomial for e^r on |r| <= ln 2 / 2,
/// scaled by 2^k so that denormal results come out rounded, not flushed
/// (upstream clamps k to [-127, 127] and builds 2^k's bits: exp(-90) came
/// out 0). With `scalef`
/// (AVX-512) by llvm.intr.ldexp, one vscalefps, which rounds denormals and
/// saturates to 0 and infinity by itself (three instructions of chain8's
/// sigmoid against upstream's six); elsewhere by two factors 2^(k/2) and
/// 2^(k - k/2), each a normal float built from its bits: the first product
/// is exact, so the second rounds once, as ldexp does. Below -104 exp is 0
/// (selected, the lane computing exp(0) meanwhile: no underflow), above 88.8
/// x is clamped (infinity); so r and both factors stay finite. NaN passes
/// (the lower test is ordered, the clamp's predicate unordered) and p
/// carries it through the products.
///
/// An exp marked kNonPositiveOperandAttr (x <= 0 or NaN: softmax's
/// x - max, sigmoid's -|x|) needs no upper clamp, and without `scalef`
/// takes k and its scale from one rounding: x / ln 2 + (1.5 * 2^23 + 151)
/// lands in [2^23, 2^24), where floats are the integers, so the fma rounds
/// to k + 151 + 1.5 * 2^23 (to nearest even, once), subtracting the constant
/// gives k exactly, and the sum's bits shifted left by 23 are the float
/// 2^(k + 24), normal for k in [-150, 0]. The polynomial computes
/// e^r * 2^-24 (normal), and its product with 2^(k + 24) rounds once, as
/// ldexp would: eight instructions fewer than the general path, with NaN
/// carried by p as before.
struct ExpScaledExactly : OpRewritePattern<math::ExpOp> {
  ExpScaledExactly(MLIRContext *context, bool scalef)
      : OpRewritePattern(context, /*benefit=*/2), scalef(scalef) {}
  bool scalef;
  LogicalResult matchAndRewrite(math::ExpOp op, PatternRewriter &rewriter) const override {
    Value x = op.getOperand();
    if (!x.getType().isF32())
      return failure();
    const bool nonPositive = op->hasAttr(mlir::kiln::kNonPositiveOperandAttr);
    Location loc = op.getLoc();
    auto constant = [&](float v) -> Value {
      return arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(v));
    };
    auto fma = [&](Value a, Value b, Value c) -> Value { return math::FmaOp::create(rewriter, loc, a, b, c); };
    // Below -104 exp is 0 (clamped there, the result rounded to 0 anyway):
    // such lanes compute exp(0) instead and take 0 at the end. A result that
    // underflows costs a microcode assist on Intel cores, and a causal
    // attention softmax, whose masked scores are -1e9, underflowed in half
    // of its lanes: [8, 4, 64, 64] took 340 us, 2.6 ns an element.
    Value zero = constant(0.0f);
    Value underflows = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OLT, x, constant(-104.0f));
    x = arith::SelectOp::create(rewriter, loc, underflows, zero, x);
    auto replaceWith = [&](Value e) { rewriter.replaceOpWithNewOp<arith::SelectOp>(op, underflows, zero, e); };
    if (!nonPositive) {
      Value highest = constant(88.8f);
      Value belowHighest = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::ULE, x, highest);
      x = arith::SelectOp::create(rewriter, loc, belowHighest, x, highest);
    }
    const float log2e = 1.44269504088896341f;
    // 1.5 * 2^23 + 151 (exact in f32): see above.
    const float kRoundingBias = 12583063.0f;
    const bool biasedRounding = nonPositive && !scalef;
    Value biased, k;
    if (biasedRounding) {
      biased = fma(x, constant(log2e), constant(kRoundingBias));
      k = arith::SubFOp::create(rewriter, loc, biased, constant(kRoundingBias));
    } else {
      k = math::RoundEvenOp::create(rewriter, loc, arith::MulFOp::create(rewriter, loc, x, constant(log2e)));
    }
    // r = x - k ln 2, with ln 2 = 0.693359375 - 2.12194440e-4 in two parts.
    Value r = fma(k, constant(-0.693359375f), x);
    r = fma(k, constant(2.12194440e-4f), r);
    // e^r by Horner's rule with the degree-6 minimax coefficients of
    // N. Juffa's expf (as in ONNX Runtime's MLAS): six FMAs, 0.88 ulp at
    // most over all f32 inputs against 1.01 for Cephes' r + r^2 q(r) + 1,
    // which took eight operations. For the biased rounding below, the
    // coefficients are scaled by 2^-24 (exact, as is every step's result:
    // all stay normal), so p comes out as e^r * 2^-24.
    const float scale = biasedRounding ? 0x1p-24f : 1.0f;
    Value p = constant(0x1.694000p-10f * scale);
    for (float c : {0x1.125edcp-7f, 0x1.555b5ap-5f, 0x1.555450p-3f, 0x1.fffff6p-2f, 1.0f, 1.0f})
      p = fma(p, r, constant(c * scale));
    Type i32 = rewriter.getI32Type();
    auto intConstant = [&](int32_t v) -> Value {
      return arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(v));
    };
    if (biasedRounding) {
      Value bits = arith::BitcastOp::create(rewriter, loc, i32, biased);
      Value powerOfTwo = arith::BitcastOp::create(rewriter, loc, x.getType(),
                                                  arith::ShLIOp::create(rewriter, loc, bits, intConstant(23)));
      // (e^r * 2^-24) * 2^(k + 24), rounded once.
      replaceWith(arith::MulFOp::create(rewriter, loc, p, powerOfTwo));
      return success();
    }
    Value exponent = arith::FPToSIOp::create(rewriter, loc, i32, k);
    if (scalef) {
      replaceWith(LLVM::LoadExpOp::create(rewriter, loc, x.getType(), p, exponent));
      return success();
    }
    // k in [-150, 128]: both halves in [-75, 64], so 2^half is normal.
    auto powerOfTwo = [&](Value e) -> Value {
      Value bits = arith::ShLIOp::create(rewriter, loc, arith::AddIOp::create(rewriter, loc, e, intConstant(127)),
                                         intConstant(23));
      return arith::BitcastOp::create(rewriter, loc, x.getType(), bits);
    };
    Value half = arith::ShRSIOp::create(rewriter, loc, exponent, intConstant(1));
    Value rest = arith::SubIOp::create(rewriter, loc, exponent, half);
    Value scaled = arith::MulFOp::create(rewriter, loc, p, powerOfTwo(half));
    replaceWith(arith::MulFOp::create(rewriter, loc, scaled, powerOfTwo(rest)));
    return success();
  }
};

/// f32 erf as XLA and Eigen compute it: x clamped to [-4, 4] (beyond, erf is
/// +-1 in f32), then x * p(x^2) / q(x^2) with p of degree 6 and q of degree
/// 4 in x^2: 3.7e-7 from erf at most (near |x| = 4, against std::erf), in
/// 11 FMAs and one division (the interpreter's f32 erf is the same rational
/// function, runtime/interp/VectorMath.h). Upstream's
/// expansion takes three intervals, each with its own coefficients picked
/// by 21 selects per element: GELU's forward and backward (erf-based, as
/// PyTorch's default) were the slowest kernels of a transformer block's
/// step. q is negative everywhere (its coefficients all are), at most
/// -0.0143, so the division may take a reciprocal estimate (arcp, ninf) as
/// tanh's does. NaN passes the clamps (unordered predicates keep it).
struct ErfRational : OpRewritePattern<math::ErfOp> {
  ErfRational(MLIRContext *context) : OpRewritePattern(context, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(math::ErfOp op, PatternRewriter &rewriter) const override {
    Value x = op.getOperand();
    if (!x.getType().isF32())
      return failure();
    Location loc = op.getLoc();
    auto constant = [&](float v) -> Value {
      return arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(v));
    };
    auto fma = [&](Value a, Value b, Value c) -> Value { return math::FmaOp::create(rewriter, loc, a, b, c); };
    Value high = constant(4.0f), low = constant(-4.0f);
    x = arith::SelectOp::create(rewriter, loc,
                                arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::ULE, x, high), x, high);
    x = arith::SelectOp::create(rewriter, loc,
                                arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UGE, x, low), x, low);
    Value x2 = arith::MulFOp::create(rewriter, loc, x, x);
    Value p = constant(-2.72614225801306e-10f);
    for (float c : {2.77068142495902e-08f, -2.10102402082508e-06f, -5.69250639462346e-05f, -7.34990630326855e-04f,
                    -2.95459980854025e-03f, -1.60960333262415e-02f})
      p = fma(x2, p, constant(c));
    Value q = constant(-1.45660718464996e-05f);
    for (float c : {-2.13374055278905e-04f, -1.68282697438203e-03f, -7.37332916720468e-03f, -1.42647390514189e-02f})
      q = fma(x2, q, constant(c));
    Value xp = arith::MulFOp::create(rewriter, loc, x, p);
    rewriter.replaceOpWithNewOp<arith::DivFOp>(op, xp, q, arith::FastMathFlags::arcp | arith::FastMathFlags::ninf | arith::FastMathFlags::contract);
    return success();
  }
};

/// The module's math operations: the only ones the approximations rewrite.
/// The rewrites start from them (and what they create) rather than from
/// every operation of the module, which the greedy driver would also try to
/// fold: most of a large trace's kernel is loads, stores and arithmetic.
static SmallVector<Operation *> mathOps(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa_and_nonnull<math::MathDialect>(op->getDialect()))
      ops.push_back(op);
  });
  return ops;
}

LogicalResult approximateMath(ModuleOp module, bool scalef) {
  RewritePatternSet tanhPatterns(module.getContext());
  populatePolynomialApproximateTanhPattern(tanhPatterns);
  TanhDivisions divisions;
  GreedyRewriteConfig tanhConfig;
  tanhConfig.setListener(&divisions).setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  if (failed(applyOpPatternsGreedily(mathOps(module), std::move(tanhPatterns), tanhConfig)))
    return failure();
  RewritePatternSet patterns(module.getContext());
  // Ahead of upstream's exp (benefit 1), also where its other expansions
  // (expm1, erf, ...) create an exp.
  patterns.add<ExpScaledExactly>(module.getContext(), scalef);
  patterns.add<ErfRational>(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  return applyOpPatternsGreedily(mathOps(module), std::move(patterns), config);
}

void lowerIeeeMinMax(Operation *root) {
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (isa<arith::MaximumFOp, arith::MinimumFOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    Value r = isa<arith::MaximumFOp>(op) ? Value(LLVM::MaximumOp::create(b, op->getLoc(), lhs, rhs))
                                         : Value(LLVM::MinimumOp::create(b, op->getLoc(), lhs, rhs));
    op->getResult(0).replaceAllUsesWith(r);
    op->erase();
  }
}

/// `v` is a tensor.empty, or a reshape of one: a value that only names a shape.
static bool isEmptyChain(Value v) {
  Operation *def = v.getDefiningOp();
  if (isa_and_nonnull<tensor::EmptyOp>(def))
    return true;
  if (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
    return isEmptyChain(def->getOperand(0));
  return false;
}

/// Clones the ops that compute `v` from a tensor.empty before `b`'s point.
static Value cloneEmptyChain(OpBuilder &b, Value v) {
  Operation *def = v.getDefiningOp();
  IRMapping map;
  if (!isa<tensor::EmptyOp>(def))
    map.map(def->getOperand(0), cloneEmptyChain(b, def->getOperand(0)));
  return b.clone(*def, map)->getResult(cast<OpResult>(v).getResultNumber());
}

int unshareFilledInits(func::FuncOp fn) {
  int cloned = 0;
  SmallVector<linalg::FillOp> fills;
  fn.walk([&](linalg::FillOp fill) {
    if (fill.hasPureTensorSemantics() && !fill->hasOneUse() && isEmptyChain(fill.getDpsInits()[0]))
      fills.push_back(fill);
  });
  for (linalg::FillOp fill : fills) {
    SmallVector<OpOperand *> inits;
    for (OpOperand &use : fill->getResult(0).getUses()) {
      auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
      if (dps && dps.isDpsInit(&use))
        inits.push_back(&use);
    }
    // The first user (in program order) keeps the fill; each later one gets
    // a clone right before it.
    llvm::sort(inits, [](OpOperand *a, OpOperand *b) {
      Operation *x = a->getOwner(), *y = b->getOwner();
      return x->getBlock() == y->getBlock() ? x->isBeforeInBlock(y) : false;
    });
    for (OpOperand *use : llvm::drop_begin(inits)) {
      OpBuilder b(use->getOwner());
      IRMapping map;
      map.map(fill.getDpsInits()[0], cloneEmptyChain(b, fill.getDpsInits()[0]));
      use->set(b.clone(*fill.getOperation(), map)->getResult(0));
      ++cloned;
    }
  }
  return cloned;
}

namespace {
/// A count beyond any real loop's work, where estimates stop growing.
constexpr int64_t kManyIterations = int64_t{1} << 61;

int64_t saturatingProduct(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) || r > kManyIterations ? kManyIterations : r;
}

int64_t saturatingSum(int64_t a, int64_t b) { return std::min(a + b, kManyIterations); }  // a, b <= 2^61

/// A loop's constant trip count, at least 1 (1 when it is not constant).
int64_t tripCount(Value lb, Value ub, Value step) {
  auto l = getConstantIntValue(lb), u = getConstantIntValue(ub), s = getConstantIntValue(step);
  return l && u && s && *s > 0 ? std::max<int64_t>(1, (*u - *l + *s - 1) / *s) : 1;
}

/// Iterations of the innermost loops one run of `block` makes (at least 1):
/// loops one after another add up, nested loops multiply. A row-fused body
/// runs dozens of loop nests in a row; the product of all their trip counts
/// overflowed to 0 and kept a training step's largest loops serial.
int64_t innermostIterations(Block &block) {
  int64_t total = 0;
  for (Operation &op : block) {
    int64_t work = 0;
    for (Region &region : op.getRegions())
      for (Block &nested : region)
        work = saturatingSum(work, innermostIterations(nested));
    if (auto loop = dyn_cast<scf::ForOp>(op))
      work = saturatingProduct(tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep()),
                               std::max<int64_t>(1, work));
    total = saturatingSum(total, work);
  }
  return std::max<int64_t>(1, total);
}
} // namespace

LogicalResult outlineParallelLoops(ModuleOp module, func::FuncOp kernel, ParallelDispatches &dispatches,
                                   int &loopNests) {
  loopNests = 0;
  MLIRContext *ctx = module.getContext();
  SmallVector<scf::ParallelOp> tops;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<scf::ParallelOp, scf::ForOp, func::CallOp>(op))
      ++loopNests;
    if (auto p = dyn_cast<scf::ParallelOp>(op))
      tops.push_back(p);
  }
  int index = 0;
  for (scf::ParallelOp p : tops) {
    const unsigned dims = p.getNumLoops();
    auto lb0 = getConstantIntValue(p.getLowerBound()[0]);
    auto ub0 = getConstantIntValue(p.getUpperBound()[0]);
    auto st0 = getConstantIntValue(p.getStep()[0]);
    if (!lb0 || !st0 || *lb0 != 0 || *st0 != 1 || !p.getInitVals().empty())
      continue;  // stays serial
    // A dynamic trip count (dynamic-shape kernels) is always dispatched: the
    // runtime runs it inline when it is within one grain.
    // Grain: aim for ~16K innermost iterations per task.
    int64_t inner = 1;
    for (unsigned d = 1; d < dims; ++d)
      inner = saturatingProduct(inner, tripCount(p.getLowerBound()[d], p.getUpperBound()[d], p.getStep()[d]));
    inner = saturatingProduct(inner, innermostIterations(*p.getBody()));
    // Small loops stay serial and inline: a task would cost more than the
    // work, and every outlined body costs compile time.
    if (ub0 && *ub0 * inner < kMinParallelWork)
      continue;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1));

    // Values the loop uses from the kernel: rebuilt in the body from the
    // kernel arguments (constants and views are pure, so cloning is exact).
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(p.getRegion(), captured);
    for (Value v : p->getOperands())
      captured.insert(v);
    llvm::SetVector<Operation *> slice;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      BackwardSliceOptions options;
      options.inclusive = true;
      options.filter = [&](Operation *op) { return op->getParentOp() == kernel.getOperation(); };
      if (failed(getBackwardSlice(def, &slice, options)))
        return p.emitError("kiln: cannot outline the parallel loop (slice)");
    }
    for (Operation *op : slice)
      if (!isMemoryEffectFree(op) && !isa<ViewLikeOpInterface>(op))
        return op->emitError("kiln: a parallel loop uses a value with side effects; cannot outline it");

    const std::string bodyName = kernel.getName().str() + "_par" + std::to_string(index);
    const std::string declName = "__kiln_parallel_" + std::to_string(index);
    ++index;
    SmallVector<Type> bodyArgs{IndexType::get(ctx), IndexType::get(ctx)};
    llvm::append_range(bodyArgs, kernel.getArgumentTypes());
    OpBuilder mb(ctx);
    mb.setInsertionPointAfter(kernel);
    auto body = func::FuncOp::create(mb, p.getLoc(), bodyName, FunctionType::get(ctx, bodyArgs, {}));
    body.setPrivate();
    Block *entry = body.addEntryBlock();
    IRMapping map;
    for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
      map.map(kernel.getArgument(i), entry->getArgument(2 + i));
    OpBuilder bb = OpBuilder::atBlockEnd(entry);
    for (Operation *op : topologicalSort(slice))
      bb.clone(*op, map);
    auto clone = cast<scf::ParallelOp>(bb.clone(*p, map));
    clone->setOperand(0, entry->getArgument(0));          // lower bound of dim 0
    clone->setOperand(dims, entry->getArgument(1));       // upper bound of dim 0
    func::ReturnOp::create(bb, p.getLoc());
    hoistRowBuffers(body);

    SmallVector<Type> declArgs{IndexType::get(ctx)};
    llvm::append_range(declArgs, kernel.getArgumentTypes());
    auto decl = func::FuncOp::create(mb, p.getLoc(), declName, FunctionType::get(ctx, declArgs, {}));
    decl.setPrivate();
    OpBuilder cb(p);
    SmallVector<Value> callArgs{ub0 ? Value(arith::ConstantIndexOp::create(cb, p.getLoc(), *ub0))
                                    : p.getUpperBound()[0]};
    llvm::append_range(callArgs, kernel.getArguments());
    auto call = func::CallOp::create(cb, p.getLoc(), decl, callArgs);
    p.erase();
    if (failed(pruneKernelArguments(body, 2, kernel.getNumArguments(), decl, 1, call)))
      return failure();
    dispatches[declName] = {bodyName, grain};
  }
  // Loops that stay in the kernel run serially there.
  hoistRowBuffers(kernel);
  return success();
}

/// Erases the operations of `fn` whose results nobody reads and that have
/// no side effects (the memref descriptors built for unused arguments), so
/// that an argument's uses say whether the body reads it.
static void eraseDeadOps(LLVM::LLVMFuncOp fn) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    fn.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (op != fn.getOperation() && isOpTriviallyDead(op))
        dead.push_back(op);
    });
    for (Operation *op : dead) {
      op->erase();
      changed = true;
    }
  }
}

LogicalResult finalizeLLVMModule(ModuleOp module, const std::string &kernelName, const std::string &entryName,
                                 const ParallelDispatches &dispatches, const std::set<std::string> &parts,
                                 const std::set<unsigned> &sharedArgs, int sizesSlot) {
  MLIRContext *ctx = module.getContext();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = IntegerType::get(ctx, 64);
  auto voidTy = LLVM::LLVMVoidType::get(ctx);
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();

  auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(kernelName);
  if (!kernel)
    return module.emitError("kiln: kernel function missing after lowering");

  auto pfor = module.lookupSymbol<LLVM::LLVMFuncOp>(kParallelForFn);
  if (!pfor && !dispatches.empty())
    pfor = LLVM::LLVMFuncOp::create(mb, loc, kParallelForFn, LLVM::LLVMFunctionType::get(voidTy, {ptr, ptr, i64, i64}));

  /// Loads `count` pointers from the array `base` at the builder's position.
  auto loadPointers = [&](OpBuilder &b, Value base, unsigned count) {
    SmallVector<Value> out;
    for (unsigned k = 0; k < count; ++k) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, base, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(k)});
      out.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
    }
    return out;
  };
  /// Loads values of `types` from consecutive 8-byte slots of `base`
  /// (pointers, and the i64 sizes of dynamic-shape kernels).
  auto loadSlots = [&](OpBuilder &b, Value base, TypeRange types) {
    SmallVector<Value> out;
    for (auto [k, type] : llvm::enumerate(types)) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, base, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(k)});
      out.push_back(LLVM::LoadOp::create(b, loc, type, slot));
    }
    return out;
  };

  for (const auto &[declName, dispatch] : dispatches) {
    auto decl = module.lookupSymbol<LLVM::LLVMFuncOp>(declName);
    auto body = module.lookupSymbol<LLVM::LLVMFuncOp>(dispatch.body);
    if (!decl || !body)
      return module.emitError("kiln: parallel body missing after lowering");
    // The body takes the kernel arguments it read when it was outlined;
    // only those it still reads after lowering travel through ctx (a store
    // per argument per dispatch, a load per argument per body).
    eraseDeadOps(body);
    SmallVector<unsigned> used;
    for (unsigned k = 2; k < body.getNumArguments(); ++k)
      if (!body.getArgument(k).use_empty())
        used.push_back(k - 2);
    const auto pointers = static_cast<unsigned>(used.size());
    // Trampoline: body(begin, end, the arguments it reads loaded from ctx, null for the others).
    auto tramp = LLVM::LLVMFuncOp::create(mb, loc, dispatch.body + "_tramp",
                                          LLVM::LLVMFunctionType::get(voidTy, {ptr, i64, i64}));
    {
      Block *entry = tramp.addEntryBlock(mb);
      OpBuilder b = OpBuilder::atBlockEnd(entry);
      SmallVector<Value> args{entry->getArgument(1), entry->getArgument(2)};
      SmallVector<Type> usedTypes;
      for (unsigned k : used)
        usedTypes.push_back(body.getArgument(2 + k).getType());
      SmallVector<Value> loaded = loadSlots(b, entry->getArgument(0), usedTypes);
      // The runtime starts such a loop's chunks at multiples of
      // kParallelChunkAlign (ParallelChunks.h); LLVM then knows a flat
      // loop's vector accesses from `begin` aligned where its buffers are.
      if (exec::alignsChunks(dispatch.grain)) {
        Value mask = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(exec::kParallelChunkAlign - 1));
        Value zero = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(0));
        Value low = LLVM::AndOp::create(b, loc, entry->getArgument(1), mask);
        LLVM::AssumeOp::create(b, loc, LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, low, zero));
      }
      for (unsigned k = 0, next = 0; k + 2 < body.getNumArguments(); ++k) {
        if (next < used.size() && used[next] == k) {
          args.push_back(loaded[next++]);
          continue;
        }
        Type t = body.getArgument(2 + k).getType();
        args.push_back(LLVM::PoisonOp::create(b, loc, t));
      }
      LLVM::CallOp::create(b, loc, body, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});
    }
    SmallVector<LLVM::CallOp> calls;
    module.walk([&](LLVM::CallOp call) {
      if (call.getCallee() && *call.getCallee() == declName)
        calls.push_back(call);
    });
    for (LLVM::CallOp call : calls) {
      auto caller = call->getParentOfType<LLVM::LLVMFuncOp>();
      OpBuilder ab = OpBuilder::atBlockBegin(&caller.getBody().front());
      Value one = LLVM::ConstantOp::create(ab, loc, i64, ab.getI64IntegerAttr(std::max(1u, pointers)));
      Value array = LLVM::AllocaOp::create(ab, loc, ptr, ptr, one);
      OpBuilder b(call);
      for (unsigned j = 0; j < pointers; ++j) {
        Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, array, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(j)});
        LLVM::StoreOp::create(b, loc, call.getOperand(1 + used[j]), slot);
      }
      Value fn = LLVM::AddressOfOp::create(b, loc, ptr, tramp.getSymName());
      Value grain = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(dispatch.grain));
      LLVM::CallOp::create(b, loc, pfor, ValueRange{fn, array, call.getOperand(0), grain});
      call.erase();
    }
    decl.erase();
  }

  // Entry: void entry(void** args) -> kernel(args[0], args[1], ...).
  auto entryFn = LLVM::LLVMFuncOp::create(mb, loc, entryName, LLVM::LLVMFunctionType::get(voidTy, {ptr}));
  {
    Block *entry = entryFn.addEntryBlock(mb);
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    // Pointers come from args[0], args[1], ...; the sizes of a dynamic-shape
    // kernel from the int64 array args[sizesSlot].
    unsigned pointerCount = 0, sizeCount = 0;
    for (Type t : kernel.getArgumentTypes()) {
      if (t == ptr)
        ++pointerCount;
      else if (t == i64 && sizesSlot >= 0)
        ++sizeCount;
      else
        return kernel.emitError("kiln: kernel arguments must all be pointers (static memrefs)");
    }
    SmallVector<Value> pointers = loadPointers(b, entry->getArgument(0), pointerCount);
    SmallVector<Value> sizes;
    if (sizeCount > 0) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, entry->getArgument(0), ArrayRef<LLVM::GEPArg>{sizesSlot});
      Value array = LLVM::LoadOp::create(b, loc, ptr, slot);
      for (unsigned k = 0; k < sizeCount; ++k) {
        Value at = LLVM::GEPOp::create(b, loc, ptr, i64, array, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(k)});
        sizes.push_back(LLVM::LoadOp::create(b, loc, i64, at));
      }
    }
    SmallVector<Value> callArgs;
    unsigned nextPointer = 0, nextSize = 0;
    for (Type t : kernel.getArgumentTypes())
      callArgs.push_back(t == ptr ? pointers[nextPointer++] : sizes[nextSize++]);
    LLVM::CallOp::create(b, loc, kernel, callArgs);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }

  // Buffers never alias inside a kernel, except the pairs the runtime may
  // donate (sharedArgs); everything but the entry and the runtime's
  // functions is private to this module.
  std::set<std::string> bodies;
  for (const auto &[declName, dispatch] : dispatches)
    bodies.insert(dispatch.body);
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
    if (fn.isExternal() || fn.getSymName() == entryName)
      continue;
    fn.setLinkageAttr(LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
    if (fn.getSymName().ends_with("_tramp"))
      continue;
    // Where the kernel's arguments start (outlined bodies start with begin,
    // end; parts take the kernel's arguments first, then their own), and
    // which of them an outlined function kept (KernelArguments.h).
    const unsigned first = bodies.count(fn.getSymName().str()) ? 2 : 0;
    const bool isKernel = fn.getSymName() == kernelName;
    const bool part = parts.count(fn.getSymName().str()) > 0;
    if (part)
      fn.setNoInline(true);
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      std::optional<unsigned> kernelArg;
      if (isKernel)
        kernelArg = i;
      else if (first == 2 || part)
        kernelArg = kernelArgumentOf(fn, first, i);
      if (fn.getArgument(i).getType() != ptr || (kernelArg && sharedArgs.count(*kernelArg)))
        continue;
      fn.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), UnitAttr::get(ctx));
    }
    fn->removeAttr(kKernelArgsAttr);
  }
  return success();
}

} // namespace kiln::jit::cpu

namespace kiln::jit::cpu {

namespace {
bool isContiguous(mlir::Value v) {
  auto type = llvm::dyn_cast<mlir::MemRefType>(v.getType());
  return type && mlir::memref::isStaticShapeAndContiguousRowMajor(type);
}

/// Static shape, rank >= 2 and a unit-stride innermost dimension.
bool hasContiguousRows(mlir::Value v) {
  auto type = llvm::dyn_cast<mlir::MemRefType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 2)
    return false;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  return mlir::succeeded(type.getStridesAndOffset(strides, offset)) && strides.back() == 1;
}

/// `op` as loops over its outer dimensions copying one contiguous row each
/// (a memref.copy of a unit-stride row subview, which lowers to memcpy).
void copyByRows(mlir::memref::CopyOp op) {
  mlir::OpBuilder b(op);
  const mlir::Location loc = op.getLoc();
  auto type = llvm::cast<mlir::MemRefType>(op.getSource().getType());
  const int64_t rank = type.getRank();
  llvm::SmallVector<mlir::Value> ivs;
  mlir::Value zero = mlir::arith::ConstantIndexOp::create(b, loc, 0);
  mlir::Value one = mlir::arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t d = 0; d + 1 < rank; ++d) {
    mlir::Value ub = mlir::arith::ConstantIndexOp::create(b, loc, type.getDimSize(d));
    auto loop = mlir::scf::ForOp::create(b, loc, zero, ub, one);
    ivs.push_back(loop.getInductionVar());
    b.setInsertionPoint(loop.getBody()->getTerminator());
  }
  llvm::SmallVector<mlir::OpFoldResult> offsets(ivs.begin(), ivs.end());
  offsets.push_back(b.getIndexAttr(0));
  llvm::SmallVector<mlir::OpFoldResult> sizes(rank - 1, b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(type.getDimSize(rank - 1)));
  llvm::SmallVector<mlir::OpFoldResult> unit(rank, b.getIndexAttr(1));
  mlir::Value from = mlir::memref::SubViewOp::create(b, loc, op.getSource(), offsets, sizes, unit);
  mlir::Value to = mlir::memref::SubViewOp::create(b, loc, op.getTarget(), offsets, sizes, unit);
  mlir::memref::CopyOp::create(b, loc, from, to);
  op.erase();
}
} // namespace

void copyToLinalg(mlir::memref::CopyOp op) {
  mlir::OpBuilder b(op);
  mlir::linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
  op.erase();
}

int copiesToLinalg(mlir::func::FuncOp fn) {
  llvm::SmallVector<mlir::memref::CopyOp> copies;
  fn.walk([&](mlir::memref::CopyOp op) { copies.push_back(op); });
  for (mlir::memref::CopyOp op : copies)
    copyToLinalg(op);
  return static_cast<int>(copies.size());
}

int stridedCopiesToRows(mlir::func::FuncOp fn) {
  llvm::SmallVector<mlir::memref::CopyOp> copies;
  fn.walk([&](mlir::memref::CopyOp op) {
    if (!isContiguous(op.getSource()) || !isContiguous(op.getTarget()))
      copies.push_back(op);
  });
  for (mlir::memref::CopyOp op : copies) {
    if (hasContiguousRows(op.getSource()) && hasContiguousRows(op.getTarget()))
      copyByRows(op);
    else
      copyToLinalg(op);
  }
  return static_cast<int>(copies.size());
}

} // namespace kiln::jit::cpu
