//===- X86VectorIdioms.cpp - AVX-512 forms of two vector idioms -----------===//

#include "jit/targets/cpu/X86VectorIdioms.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "llvm/Analysis/LoopInfo.h"
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

/// vrange(a, b) with `immediate` (kRangeMin or kRangeMax).
llvm::Value *createRange(llvm::IRBuilder<> &b, llvm::Value *lhs, llvm::Value *rhs, int immediate) {
  llvm::Type *type = lhs->getType();
  llvm::SmallVector<llvm::Value *, 6> args = {lhs, rhs, b.getInt32(immediate), llvm::PoisonValue::get(type),
                                              allLanes(b, type)};
  addRoundingArgument(b, type, args);
  return b.CreateIntrinsic(rangeIntrinsic(type), {}, args);
}

/// llvm.maximum/minimum(a, b) -> select(uno(a, b), a + b, vrange(a, b)).
void rewriteMinMax(llvm::IntrinsicInst *call) {
  llvm::IRBuilder<> b(call);
  llvm::Value *lhs = call->getArgOperand(0);
  llvm::Value *rhs = call->getArgOperand(1);
  llvm::Value *result =
      createRange(b, lhs, rhs, call->getIntrinsicID() == llvm::Intrinsic::maximum ? kRangeMax : kRangeMin);
  if (!call->hasNoNaNs()) {
    llvm::Value *unordered = b.CreateFCmpUNO(lhs, rhs);
    result = b.CreateSelect(unordered, b.CreateFAdd(lhs, rhs), result);
  }
  result->takeName(call);
  call->replaceAllUsesWith(result);
  call->eraseFromParent();
}

/// A min/max reduction of a loop, as the vectoriser makes them: `step =
/// maximum(acc, x)` (or minimum, either operand order), where `acc` is a
/// phi of the loop's header whose only user is the step, fed back from the
/// latch, and the step's other users lie after the loop. The loop leaves
/// through its latch into a block entered by that one edge alone.
struct MinMaxReduction {
  llvm::Loop *loop;
  llvm::PHINode *acc;
  llvm::IntrinsicInst *step;
  llvm::Value *x;
};

bool matchReduction(llvm::IntrinsicInst *step, llvm::LoopInfo &loops, MinMaxReduction &out) {
  llvm::Loop *loop = loops.getLoopFor(step->getParent());
  if (!loop)
    return false;
  llvm::BasicBlock *latch = loop->getLoopLatch(), *exit = loop->getUniqueExitBlock();
  // One edge into the exit (a switch may have several to one block, each
  // an incoming value of its phis), and a place to put the selects.
  if (!latch || !loop->getLoopPreheader() || !exit || loop->getExitingBlock() != latch ||
      exit->getSinglePredecessor() != latch || exit->isEHPad() || exit->getFirstInsertionPt() == exit->end())
    return false;
  for (unsigned i : {0u, 1u}) {
    auto *acc = llvm::dyn_cast<llvm::PHINode>(step->getArgOperand(i));
    if (!acc || acc->getParent() != loop->getHeader() || acc->getNumIncomingValues() != 2 ||
        acc->getIncomingValueForBlock(latch) != step || !acc->hasOneUse())
      continue;
    const bool usedAfterOnly = llvm::all_of(step->users(), [&](llvm::User *user) {
      return user == acc || !loop->contains(llvm::cast<llvm::Instruction>(user));
    });
    if (!usedAfterOnly)
      continue;
    out = {loop, acc, step, step->getArgOperand(1 - i)};
    return true;
  }
  return false;
}

/// A min/max reduction as vrange alone in the loop, with a mask of the
/// lanes that have met no NaN yet (`ordered`, one masked compare per step,
/// folded into the compare's write mask): the uses after the loop take NaN
/// in the lanes that met one. Against rewriteMinMax's form, the loop-carried
/// chain is one vrange instead of vrange and a masked add, and the step is
/// two instructions instead of three: softmax's row max ran at half the
/// speed of a plain vmaxps loop.
void rewriteReduction(const MinMaxReduction &r) {
  llvm::Type *type = r.step->getType();
  llvm::BasicBlock *preheader = r.loop->getLoopPreheader(), *latch = r.loop->getLoopLatch();
  llvm::BasicBlock *exit = r.loop->getUniqueExitBlock();
  llvm::Value *init = r.acc->getIncomingValueForBlock(preheader);
  llvm::IRBuilder<> pb(preheader->getTerminator());
  llvm::Value *initOrdered = pb.CreateFCmpORD(init, init);
  llvm::PHINode *ordered =
      llvm::PHINode::Create(initOrdered->getType(), 2, r.acc->getName() + ".ordered", r.acc->getIterator());
  llvm::IRBuilder<> b(r.step);
  const int immediate = r.step->getIntrinsicID() == llvm::Intrinsic::maximum ? kRangeMax : kRangeMin;
  llvm::Value *range = createRange(b, r.acc, r.x, immediate);
  llvm::Value *next = b.CreateAnd(ordered, b.CreateFCmpORD(r.x, r.x), ordered->getName() + ".next");
  ordered->addIncoming(initOrdered, preheader);
  ordered->addIncoming(next, latch);
  range->takeName(r.step);
  r.acc->setIncomingValueForBlock(latch, range);
  // After the loop: NaN in the lanes that met one. The exit block is
  // entered from the latch alone, so `next` dominates it.
  llvm::IRBuilder<> eb(exit, exit->getFirstInsertionPt());
  llvm::Constant *nan = llvm::ConstantFP::getQNaN(type);
  llvm::Value *fixed = nullptr;
  llvm::SmallVector<llvm::Use *> after;
  for (llvm::Use &use : r.step->uses())
    after.push_back(&use);
  for (llvm::Use *use : after) {
    auto *phi = llvm::dyn_cast<llvm::PHINode>(use->getUser());
    if (phi && phi->getParent() == exit) {
      // An LCSSA phi: it takes the vrange, its users the fixed value.
      use->set(range);
      llvm::Value *phiFixed = eb.CreateSelect(next, phi, nan);
      phi->replaceUsesWithIf(phiFixed, [&](llvm::Use &u) { return u.getUser() != phiFixed; });
      continue;
    }
    if (!fixed)
      fixed = eb.CreateSelect(next, range, nan, range->getName() + ".fixed");
    use->set(fixed);
  }
  r.step->eraseFromParent();
}

/// llvm.vector.reduce.fmaximum/fminimum(v) -> vrange of halves down to one
/// lane, and NaN where any lane is NaN: about 10 instructions for 16 f32
/// lanes, where instruction selection chained 4 compares, blends and
/// scalar moves through general registers per halving (~50).
void rewriteReduceMinMax(llvm::IntrinsicInst *call) {
  llvm::IRBuilder<> b(call);
  llvm::Value *v = call->getArgOperand(0);
  const int immediate = call->getIntrinsicID() == llvm::Intrinsic::vector_reduce_fmaximum ? kRangeMax : kRangeMin;
  llvm::Value *anyNaN = call->hasNoNaNs() ? nullptr : b.CreateOrReduce(b.CreateFCmpUNO(v, v));
  auto lanesOf = [](llvm::Value *value) {
    return static_cast<int>(llvm::cast<llvm::FixedVectorType>(value->getType())->getNumElements());
  };
  while (vectorBits(v->getType()) > 128) {
    const int half = lanesOf(v) / 2;
    llvm::SmallVector<int> low, high;
    for (int i = 0; i < half; ++i) {
      low.push_back(i);
      high.push_back(half + i);
    }
    v = createRange(b, b.CreateShuffleVector(v, low), b.CreateShuffleVector(v, high), immediate);
  }
  // Within 128 bits: fold the upper half of the live lanes onto the lower.
  for (int live = lanesOf(v); live > 1; live /= 2) {
    llvm::SmallVector<int> upper;
    for (int i = 0; i < lanesOf(v); ++i)
      upper.push_back(live / 2 + i % (live / 2));
    v = createRange(b, v, b.CreateShuffleVector(v, upper), immediate);
  }
  llvm::Value *result = b.CreateExtractElement(v, uint64_t{0});
  if (anyNaN)
    result = b.CreateSelect(anyNaN, llvm::ConstantFP::getQNaN(call->getType()), result);
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
  llvm::PreservedAnalyses run(llvm::Function &fn, llvm::FunctionAnalysisManager &analyses) {
    const Avx512Features has(fn);
    if (!has.f)
      return llvm::PreservedAnalyses::all();
    llvm::SmallVector<llvm::IntrinsicInst *> minMax, ldexp, reduceMinMax;
    for (llvm::Instruction &inst : llvm::instructions(fn)) {
      auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst);
      if (!call)
        continue;
      switch (call->getIntrinsicID()) {
      case llvm::Intrinsic::maximum:
      case llvm::Intrinsic::minimum:
        if (has.dq && supportedVector(call->getType(), has))
          minMax.push_back(call);
        break;
      case llvm::Intrinsic::ldexp:
        if (supportedVector(call->getType(), has))
          ldexp.push_back(call);
        break;
      case llvm::Intrinsic::vector_reduce_fmaximum:
      case llvm::Intrinsic::vector_reduce_fminimum:
        // A scalar of a vector: the halves below 512 bits need AVX-512VL.
        if (has.dq && has.vl && supportedVector(call->getArgOperand(0)->getType(), has))
          reduceMinMax.push_back(call);
        break;
      default:
        break;
      }
    }
    bool changed = !minMax.empty() || !reduceMinMax.empty();
    llvm::LoopInfo *loops = minMax.empty() ? nullptr : &analyses.getResult<llvm::LoopAnalysis>(fn);
    for (llvm::IntrinsicInst *call : minMax) {
      MinMaxReduction reduction;
      if (!call->hasNoNaNs() && matchReduction(call, *loops, reduction))
        rewriteReduction(reduction);
      else
        rewriteMinMax(call);
    }
    for (llvm::IntrinsicInst *call : reduceMinMax)
      rewriteReduceMinMax(call);
    for (llvm::IntrinsicInst *call : ldexp)
      changed |= rewriteLdexp(call);
    return keptAnalyses(changed);
  }
};

} // namespace

void registerX86VectorIdiomPasses(llvm::PassBuilder &pb) {
  registerPass<X86VectorIdioms>(pb, "kiln-x86-vector-idioms");
}

} // namespace kiln::jit::cpu
