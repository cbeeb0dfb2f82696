//===- X86VectorIdioms.cpp - AVX-512 forms of two vector idioms -----------===//

#include "jit/targets/cpu/X86VectorIdioms.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {
namespace {

/// Which AVX-512 subsets the function is compiled for.
struct Avx512Features {
  bool f = false, dq = false, vl = false;

  explicit Avx512Features(const llvm::Function &fn) {
    const llvm::StringRef features = fn.getFnAttribute("target-features").getValueAsString();
    f = features.contains("+avx512f");
    dq = f && features.contains("+avx512dq");
    vl = f && features.contains("+avx512vl");
  }
};

/// f32 or f64 vectors of 512 bits, or of 256 and 128 with AVX-512VL.
bool supportedVector(llvm::Type *type, const Avx512Features &has) {
  auto *vector = llvm::dyn_cast<llvm::FixedVectorType>(type);
  if (!vector || !(vector->getElementType()->isFloatTy() || vector->getElementType()->isDoubleTy()))
    return false;
  const uint64_t bits = vector->getPrimitiveSizeInBits().getFixedValue();
  return bits == 512 || (has.vl && (bits == 256 || bits == 128));
}

bool isF32(llvm::Type *vectorType) {
  return llvm::cast<llvm::FixedVectorType>(vectorType)->getElementType()->isFloatTy();
}

uint64_t vectorBits(llvm::Type *vectorType) {
  return vectorType->getPrimitiveSizeInBits().getFixedValue();
}

/// The intrinsic of `ids` (f32 forms of 512, 256 and 128 bits, then the
/// f64 forms) for vectors of `type`.
llvm::Intrinsic::ID formFor(llvm::Type *type, const llvm::Intrinsic::ID (&ids)[6]) {
  const int width = vectorBits(type) == 512 ? 0 : vectorBits(type) == 256 ? 1 : 2;
  return ids[(isF32(type) ? 0 : 3) + width];
}

llvm::Intrinsic::ID rangeIntrinsic(llvm::Type *type) {
  using namespace llvm::Intrinsic;
  static constexpr ID kForms[6] = {x86_avx512_mask_range_ps_512, x86_avx512_mask_range_ps_256,
                                   x86_avx512_mask_range_ps_128, x86_avx512_mask_range_pd_512,
                                   x86_avx512_mask_range_pd_256, x86_avx512_mask_range_pd_128};
  return formFor(type, kForms);
}

llvm::Intrinsic::ID scalefIntrinsic(llvm::Type *type) {
  using namespace llvm::Intrinsic;
  static constexpr ID kForms[6] = {x86_avx512_mask_scalef_ps_512, x86_avx512_mask_scalef_ps_256,
                                   x86_avx512_mask_scalef_ps_128, x86_avx512_mask_scalef_pd_512,
                                   x86_avx512_mask_scalef_pd_256, x86_avx512_mask_scalef_pd_128};
  return formFor(type, kForms);
}

/// The all-lanes write mask of the masked intrinsics: i16 for 16 lanes,
/// i8 otherwise (the bits above the lanes are ignored).
llvm::Constant *allLanes(llvm::IRBuilder<> &b, llvm::Type *type) {
  const unsigned lanes = llvm::cast<llvm::FixedVectorType>(type)->getNumElements();
  return lanes == 16 ? static_cast<llvm::Constant *>(b.getInt16(0xffff)) : b.getInt8(0xff);
}

/// Appends the 512-bit forms' rounding / exception argument: the current
/// direction (_MM_FROUND_CUR_DIRECTION).
void addRoundingArgument(llvm::IRBuilder<> &b, llvm::Type *type, llvm::SmallVectorImpl<llvm::Value *> &args) {
  if (vectorBits(type) == 512)
    args.push_back(b.getInt32(4));
}

/// vrange's immediate: bits 1:0 pick min (00) or max (01); bits 3:2 = 01
/// take the sign of the compare result, which orders -0 below +0 in
/// either operand order. A quiet NaN operand makes vrange return the other
/// operand, hence the NaN select around it.
constexpr int kRangeMin = 0b0100;
constexpr int kRangeMax = 0b0101;

/// llvm.maximum/minimum(a, b) -> select(uno(a, b), a + b, vrange(a, b)).
void rewriteMinMax(llvm::IntrinsicInst *call) {
  llvm::IRBuilder<> b(call);
  llvm::Value *lhs = call->getArgOperand(0);
  llvm::Value *rhs = call->getArgOperand(1);
  llvm::Type *type = call->getType();
  llvm::SmallVector<llvm::Value *, 6> args = {
      lhs, rhs, b.getInt32(call->getIntrinsicID() == llvm::Intrinsic::maximum ? kRangeMax : kRangeMin),
      llvm::PoisonValue::get(type), allLanes(b, type)};
  addRoundingArgument(b, type, args);
  llvm::Value *result = b.CreateIntrinsic(rangeIntrinsic(type), {}, args);
  if (!call->hasNoNaNs()) {
    llvm::Value *unordered = b.CreateFCmpUNO(lhs, rhs);
    result = b.CreateSelect(unordered, b.CreateFAdd(lhs, rhs), result);
  }
  result->takeName(call);
  call->replaceAllUsesWith(result);
  call->eraseFromParent();
}

/// Whether `value` is a whole number by construction: a rounding
/// intrinsic's result.
bool isIntegral(llvm::Value *value) {
  auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(value);
  if (!call)
    return false;
  switch (call->getIntrinsicID()) {
  case llvm::Intrinsic::roundeven:
  case llvm::Intrinsic::rint:
  case llvm::Intrinsic::nearbyint:
  case llvm::Intrinsic::floor:
  case llvm::Intrinsic::ceil:
  case llvm::Intrinsic::trunc:
  case llvm::Intrinsic::round:
    return true;
  default:
    return false;
  }
}

/// llvm.ldexp(x, fptosi(r)), r integral of x's type -> vscalef(x, r).
/// (fptosi of a value out of i32's range is poison; vscalef gives the
/// saturated x * 2^r there, a refinement.)
bool rewriteLdexp(llvm::IntrinsicInst *call) {
  llvm::Value *x = call->getArgOperand(0);
  auto *toInt = llvm::dyn_cast<llvm::FPToSIInst>(call->getArgOperand(1));
  if (!toInt || toInt->getOperand(0)->getType() != x->getType() || !isIntegral(toInt->getOperand(0)))
    return false;
  llvm::IRBuilder<> b(call);
  llvm::Type *type = call->getType();
  llvm::SmallVector<llvm::Value *, 5> args = {x, toInt->getOperand(0), llvm::PoisonValue::get(type),
                                              allLanes(b, type)};
  addRoundingArgument(b, type, args);
  llvm::Value *result = b.CreateIntrinsic(scalefIntrinsic(type), {}, args);
  result->takeName(call);
  call->replaceAllUsesWith(result);
  call->eraseFromParent();
  if (toInt->use_empty())
    toInt->eraseFromParent();
  return true;
}

struct X86VectorIdioms : llvm::PassInfoMixin<X86VectorIdioms> {
  llvm::PreservedAnalyses run(llvm::Function &fn, llvm::FunctionAnalysisManager &) {
    const Avx512Features has(fn);
    if (!has.f)
      return llvm::PreservedAnalyses::all();
    llvm::SmallVector<llvm::IntrinsicInst *> minMax, ldexp;
    for (llvm::Instruction &inst : llvm::instructions(fn)) {
      auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst);
      if (!call || !supportedVector(call->getType(), has))
        continue;
      switch (call->getIntrinsicID()) {
      case llvm::Intrinsic::maximum:
      case llvm::Intrinsic::minimum:
        if (has.dq)
          minMax.push_back(call);
        break;
      case llvm::Intrinsic::ldexp:
        ldexp.push_back(call);
        break;
      default:
        break;
      }
    }
    bool changed = !minMax.empty();
    for (llvm::IntrinsicInst *call : minMax)
      rewriteMinMax(call);
    for (llvm::IntrinsicInst *call : ldexp)
      changed |= rewriteLdexp(call);
    if (!changed)
      return llvm::PreservedAnalyses::all();
    llvm::PreservedAnalyses kept;
    kept.preserveSet<llvm::CFGAnalyses>();
    return kept;
  }
};

} // namespace

void registerX86VectorIdiomPasses(llvm::PassBuilder &pb) {
  registerPass<X86VectorIdioms>(pb, "kiln-x86-vector-idioms");
}

} // namespace kiln::jit::cpu
