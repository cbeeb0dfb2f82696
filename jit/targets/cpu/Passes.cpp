//===- Passes.cpp - Kiln's own steps of the CPU pipeline as passes -*- C++ -*-===//

#include "jit/targets/cpu/Passes.h"

#include "jit/targets/cpu/BlockedWideSums.h"
#include "jit/targets/cpu/BufferDonation.h"
#include "jit/targets/cpu/CpuTransforms.h"
#include "jit/targets/cpu/ElementwiseFusion.h"
#include "jit/targets/cpu/NextRowPrefetch.h"
#include "jit/targets/cpu/ParallelLoops.h"
#include "jit/targets/cpu/ReductionOrder.h"
#include "jit/targets/cpu/RowFusion.h"
#include "jit/targets/cpu/RowScratch.h"
#include "jit/targets/cpu/ScalarPromotion.h"
#include "jit/targets/cpu/SerialParts.h"
#include "jit/targets/cpu/SplitReduction.h"
#include "jit/targets/cpu/StreamingStores.h"
#include "jit/targets/cpu/TransposeFolding.h"
#include "jit/targets/cpu/VectorizeLoops.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::jit::cpu {

std::set<unsigned> sharedArgsOf(mlir::func::FuncOp fn, llvm::ArrayRef<unsigned> listed) {
  std::set<unsigned> shared(listed.begin(), listed.end());
  if (auto recorded = fn->getAttrOfType<mlir::DenseI64ArrayAttr>(kSharedArgsAttr))
    shared.insert(recorded.asArrayRef().begin(), recorded.asArrayRef().end());
  return shared;
}

#define GEN_PASS_DEF_KILNCPUFUSEELEMENTWISE
#define GEN_PASS_DEF_KILNCPUCONVERTTOLLVM
#define GEN_PASS_DEF_KILNCPUFOLDDESCRIPTORS
#define GEN_PASS_DEF_KILNCPUSPLITFULLREDUCTIONS
#define GEN_PASS_DEF_KILNCPUDISTINCTRESULTS
#define GEN_PASS_DEF_KILNCPUBUFFERDONATION
#define GEN_PASS_DEF_KILNCPUCONVTORUNTIMECALLS
#define GEN_PASS_DEF_KILNCPUASSIGNSCRATCH
#define GEN_PASS_DEF_KILNCPUMATMULTORUNTIMECALLS
#define GEN_PASS_DEF_KILNCPUAPPROXIMATEMATH
#define GEN_PASS_DEF_KILNCPUORDERREDUCTIONLOOPS
#define GEN_PASS_DEF_KILNCPUPROMOTEACCUMULATORS
#define GEN_PASS_DEF_KILNCPUHOISTINVARIANTLOADS
#define GEN_PASS_DEF_KILNCPUFUSEROWLOOPS
#define GEN_PASS_DEF_KILNCPUOUTLINEPARALLELLOOPS
#define GEN_PASS_DEF_KILNCPUOUTLINESERIALPARTS
#define GEN_PASS_DEF_KILNCPUUNSHAREFILLS
#define GEN_PASS_DEF_KILNCPULOCALIZEROWSCRATCH
#define GEN_PASS_DEF_KILNCPUFUSELOOPSINROWS
#define GEN_PASS_DEF_KILNCPUHOISTROWBUFFERS
#define GEN_PASS_DEF_KILNCPUBLOCKWIDESUMS
#define GEN_PASS_DEF_KILNCPUROWBUFFERSINTOOUTPUTS
#define GEN_PASS_DEF_KILNCPUIEEEMINMAX
#define GEN_PASS_DEF_KILNCPUSTRIDEDCOPIES
#define GEN_PASS_DEF_KILNCPUFOLDMATMULTRANSPOSES
#define GEN_PASS_DEF_KILNCPUMARKPARALLELLOOPS
#define GEN_PASS_DEF_KILNCPUVECTORIZEPARALLELLOOPS
#define GEN_PASS_DEF_KILNCPUTAGPARALLELACCESSES
#define GEN_PASS_DEF_KILNCPUSTREAMINGSTORES
#define GEN_PASS_DEF_KILNCPUPREFETCHNEXTROWS
#include "jit/targets/cpu/Passes.h.inc"

namespace {

/// The kernel a module pass works on: the function `name`, or the first
/// defined function when `name` is empty (null when there is none). An
/// error, saying what the pass wanted it for, when `name` names none.
mlir::FailureOr<mlir::func::FuncOp> findKernel(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef purpose) {
  if (!name.empty()) {
    auto fn = module.lookupSymbol<mlir::func::FuncOp>(name);
    if (!fn || fn.isExternal()) {
      module.emitError("kiln: no kernel function '") << name << "' " << purpose;
      return mlir::failure();
    }
    return fn;
  }
  for (auto fn : module.getOps<mlir::func::FuncOp>())
    if (!fn.isExternal())
      return fn;
  return mlir::func::FuncOp();
}


struct FuseElementwise : impl::KilnCpuFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    if (mlir::failed(fuseElementwiseOps(getOperation())))
      signalPassFailure();
  }
};

struct DistinctResults : impl::KilnCpuDistinctResultsBase<DistinctResults> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      makeResultsDistinct(getOperation());
  }
};

struct BufferDonation : impl::KilnCpuBufferDonationBase<BufferDonation> {
  using Base::Base;
  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    // A dynamic-shape kernel's size arguments follow (DynamicKernel.h).
    if (numInputs + numOutputs > fn.getNumArguments()) {
      fn.emitError("kiln: num-inputs + num-outputs exceed the number of arguments");
      return signalPassFailure();
    }
    mlir::Builder b(fn.getContext());
    llvm::SmallVector<mlir::Attribute> pairs;
    std::set<int64_t> shared;
    for (auto [output, input] : findDonations(fn, numInputs, numOutputs)) {
      pairs.push_back(b.getDenseI64ArrayAttr({output, input}));
      shared.insert(input);
      shared.insert(numInputs + output);
    }
    fn->setAttr(kDonationsAttr, b.getArrayAttr(pairs));
    fn->setAttr(kSharedArgsAttr, b.getDenseI64ArrayAttr(llvm::to_vector(shared)));
  }
};

struct ConvToRuntimeCalls : impl::KilnCpuConvToRuntimeCallsBase<ConvToRuntimeCalls> {
  void runOnOperation() override {
    if (mlir::failed(convToRuntimeCalls(getOperation())))
      signalPassFailure();
  }
};

struct AssignScratch : impl::KilnCpuAssignScratchBase<AssignScratch> {
  using Base::Base;
  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    int64_t bytes = 0;
    std::vector<int64_t> dynamicScratch;
    if (mlir::failed(assignScratch(fn, bytes, dynamicSizes ? &dynamicScratch : nullptr, shareDistance)))
      return signalPassFailure();
    mlir::Builder b(fn.getContext());
    fn->setAttr(kScratchBytesAttr, b.getI64IntegerAttr(bytes));
    if (dynamicSizes)
      fn->setAttr(kDynamicScratchAttr, b.getDenseI64ArrayAttr(dynamicScratch));
  }
};

struct MatmulToRuntimeCalls : impl::KilnCpuMatmulToRuntimeCallsBase<MatmulToRuntimeCalls> {
  using Base::Base;
  void runOnOperation() override {
    if (mlir::failed(matmulToRuntimeCalls(getOperation(), numInputs)) ||
        mlir::failed(runtimeCallGenericsToCalls(getOperation())))
      signalPassFailure();
  }
};

struct ApproximateMath : impl::KilnCpuApproximateMathBase<ApproximateMath> {
  using Base::Base;
  void runOnOperation() override {
    if (mlir::failed(approximateMath(getOperation(), scalef)))
      signalPassFailure();
  }
};

struct PromoteAccumulators : impl::KilnCpuPromoteAccumulatorsBase<PromoteAccumulators> {
  void runOnOperation() override { promoteReductionAccumulators(getOperation()); }
};

struct HoistInvariantLoads : impl::KilnCpuHoistInvariantLoadsBase<HoistInvariantLoads> {
  void runOnOperation() override { hoistInvariantLoads(getOperation()); }
};

struct FuseRowLoops : impl::KilnCpuFuseRowLoopsBase<FuseRowLoops> {
  using Base::Base;
  void runOnOperation() override {
    if (getOperation().isExternal())
      return;
    fuseRowLoops(getOperation(), sharedArgsOf(getOperation(), sharedArgs));
  }
};

struct OutlineParallelLoops : impl::KilnCpuOutlineParallelLoopsBase<OutlineParallelLoops> {
  using Base::Base;
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::FailureOr<mlir::func::FuncOp> fn = findKernel(module, kernel, "to outline loops of");
    if (mlir::failed(fn))
      return signalPassFailure();
    if (!*fn)
      return;
    ParallelDispatches dispatches;
    int loopNests = 0;
    if (mlir::failed(outlineParallelLoops(module, *fn, dispatches, loopNests)))
      return signalPassFailure();
    mlir::Builder b(module.getContext());
    llvm::SmallVector<mlir::NamedAttribute> bodies;
    for (const auto &[declaration, dispatch] : dispatches) {
      bodies.push_back(b.getNamedAttr(declaration, mlir::FlatSymbolRefAttr::get(b.getContext(), dispatch.body)));
      if (auto body = module.lookupSymbol<mlir::func::FuncOp>(dispatch.body))
        body->setAttr(kGrainAttr, b.getI64IntegerAttr(dispatch.grain));
    }
    (*fn)->setAttr(kDispatchesAttr, b.getDictionaryAttr(bodies));
    (*fn)->setAttr(kLoopNestsAttr, b.getI64IntegerAttr(loopNests));
  }
};

struct OutlineSerialParts : impl::KilnCpuOutlineSerialPartsBase<OutlineSerialParts> {
  using Base::Base;
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::FailureOr<mlir::func::FuncOp> fn = findKernel(module, kernel, "to cut into parts");
    if (mlir::failed(fn))
      return signalPassFailure();
    if (!*fn)
      return;
    llvm::SmallVector<mlir::Attribute> parts;
    for (const std::string &name : outlineSerialParts(module, *fn, partOps))
      parts.push_back(mlir::FlatSymbolRefAttr::get(module.getContext(), name));
    (*fn)->setAttr(kSerialPartsAttr, mlir::ArrayAttr::get(module.getContext(), parts));
  }
};

struct UnshareFills : impl::KilnCpuUnshareFillsBase<UnshareFills> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      unshareFilledInits(getOperation());
  }
};

struct LocalizeRowScratch : impl::KilnCpuLocalizeRowScratchBase<LocalizeRowScratch> {
  using Base::Base;
  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    if (fn.isExternal() || fn.getNumArguments() == 0)
      return;
    // The scratch buffer is the kernel's trailing byte buffer (assignScratch).
    const unsigned last = fn.getNumArguments() - 1;
    auto type = llvm::dyn_cast<mlir::MemRefType>(fn.getArgument(last).getType());
    if (!type || type.getRank() != 1 || !type.getElementType().isInteger(8))
      return;
    if (localizeRowScratch(fn, last, maxRowBytes) == 0)
      return;
    // The scratch shrinks to what is left (a dynamic kernel has no static size).
    auto bytes = fn->getAttrOfType<mlir::IntegerAttr>(kScratchBytesAttr);
    const int64_t inUse = scratchBytesInUse(fn, last);
    if (bytes && inUse >= 0 && !fn->hasAttr(kDynamicScratchAttr))
      fn->setAttr(kScratchBytesAttr, mlir::Builder(fn.getContext())
                                         .getI64IntegerAttr(std::min(bytes.getInt(), (inUse + 63) / 64 * 64)));
  }
};

struct FuseLoopsInRows : impl::KilnCpuFuseLoopsInRowsBase<FuseLoopsInRows> {
  using Base::Base;
  void runOnOperation() override {
    if (!getOperation().isExternal())
      fuseLoopsInRows(getOperation(), sharedArgsOf(getOperation(), sharedArgs));
  }
};

struct RowBuffersIntoOutputs : impl::KilnCpuRowBuffersIntoOutputsBase<RowBuffersIntoOutputs> {
  using Base::Base;
  void runOnOperation() override {
    if (getOperation().isExternal())
      return;
    rowBuffersIntoOutputs(getOperation(), sharedArgsOf(getOperation(), sharedArgs));
  }
};

struct BlockWideSums : impl::KilnCpuBlockWideSumsBase<BlockWideSums> {
  using Base::Base;
  void runOnOperation() override {
    if (!getOperation().isExternal())
      blockWideSums(getOperation(), block, minBlock);
  }
};

struct StreamingStores : impl::KilnCpuStreamingStoresBase<StreamingStores> {
  using Base::Base;
  void runOnOperation() override {
    markStreamingStores(getOperation(), numInputs, numOutputs, minBytes, minFootprintBytes);
  }
};

struct PrefetchNextRows : impl::KilnCpuPrefetchNextRowsBase<PrefetchNextRows> {
  using Base::Base;
  void runOnOperation() override { prefetchNextRows(getOperation(), minRowBytes); }
};

struct HoistRowBuffers : impl::KilnCpuHoistRowBuffersBase<HoistRowBuffers> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      hoistRowBuffers(getOperation());
  }
};

struct IeeeMinMax : impl::KilnCpuIeeeMinMaxBase<IeeeMinMax> {
  void runOnOperation() override { lowerIeeeMinMax(getOperation()); }
};

struct SplitFullReductions : impl::KilnCpuSplitFullReductionsBase<SplitFullReductions> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      splitFullReductions(getOperation());
  }
};

struct OrderReductionLoops : impl::KilnCpuOrderReductionLoopsBase<OrderReductionLoops> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      orderReductionLoops(getOperation());
  }
};

struct StridedCopies : impl::KilnCpuStridedCopiesBase<StridedCopies> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      stridedCopiesToRows(getOperation());
  }
};

struct FoldMatmulTransposes : impl::KilnCpuFoldMatmulTransposesBase<FoldMatmulTransposes> {
  void runOnOperation() override {
    if (!getOperation().isExternal())
      foldTransposesIntoMatmuls(getOperation());
  }
};

struct MarkParallelLoops : impl::KilnCpuMarkParallelLoopsBase<MarkParallelLoops> {
  using Base::Base;
  void runOnOperation() override { markParallelLoops(getOperation(), f32Lanes); }
};

struct VectorizeParallelLoops : impl::KilnCpuVectorizeParallelLoopsBase<VectorizeParallelLoops> {
  using Base::Base;
  void runOnOperation() override { vectorizeParallelLoops(getOperation(), lanes); }
};

struct ConvertToLLVM : impl::KilnCpuConvertToLLVMBase<ConvertToLLVM> {
  void runOnOperation() override {
    mlir::MLIRContext *context = &getContext();
    mlir::LowerToLLVMOptions options(context);
    options.useBarePtrCallConv = true;
    mlir::LLVMTypeConverter converter(context, options);
    mlir::RewritePatternSet patterns(context);
    mlir::arith::populateArithToLLVMConversionPatterns(converter, patterns);
    mlir::index::populateIndexToLLVMConversionPatterns(converter, patterns);
    mlir::populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns);
    // The vector loops of kiln-cpu-vectorize-parallel-loops.
    mlir::populateVectorToLLVMConversionPatterns(converter, patterns);
    mlir::populateFuncToLLVMConversionPatterns(converter, patterns);
    mlir::cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    mlir::LLVMConversionTarget target(*context);
    // The one-shot driver: no pattern of these populations needs rollback,
    // and its bookkeeping cost a tenth of the lowering (the transformer
    // bench's 889-op step: 118 -> 107 ms of MLIR lowering, 1 core, Xeon).
    mlir::ConversionConfig config;
    config.allowPatternRollback = false;
    if (mlir::failed(mlir::applyPartialConversion(getOperation(), target, std::move(patterns), config)))
      signalPassFailure();
  }
};

struct FoldDescriptors : impl::KilnCpuFoldDescriptorsBase<FoldDescriptors> {
  void runOnOperation() override {
    // Reads of a descriptor: ExtractValueOp's folder follows the chain of
    // insertions to the value inserted at its position.
    getOperation()->walk([](mlir::LLVM::ExtractValueOp extract) {
      llvm::SmallVector<mlir::OpFoldResult, 1> folded;
      if (mlir::failed(extract->fold(folded)) || folded.size() != 1)
        return;
      if (auto value = llvm::dyn_cast_if_present<mlir::Value>(folded.front()); value && value != extract.getResult())
        extract.getResult().replaceAllUsesWith(value);
    });
    // Then the operations with results that nothing uses, users before what
    // they use (a function's blocks are in dominance order); another sweep
    // finds what that left unused elsewhere.
    for (bool erased = true; erased;) {
      erased = false;
      llvm::SmallVector<mlir::Operation *> ops;
      getOperation()->walk([&](mlir::Operation *op) { ops.push_back(op); });
      for (mlir::Operation *op : llvm::reverse(ops))
        if (op->getNumResults() > 0 && mlir::isOpTriviallyDead(op)) {
          op->erase();
          erased = true;
        }
    }
  }
};

struct TagParallelAccesses : impl::KilnCpuTagParallelAccessesBase<TagParallelAccesses> {
  void runOnOperation() override { tagParallelAccesses(getOperation()); }
};

} // namespace

} // namespace kiln::jit::cpu
