//===- FirstLaneScalars.cpp - First lanes of vector inductions ------------===//

#include "jit/targets/cpu/FirstLaneScalars.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {
namespace {

/// Lane 0 of integer and pointer vectors as scalars, each built once, right
/// after the vector it stands for (so it dominates whatever that vector
/// dominates), from: constants, splats, phis of two such values (the
/// inductions of loop headers), and adds, subtractions, multiplies, shifts
/// left and GEPs of those.
class FirstLanes {
 public:
  /// The scalar of lane 0 of `value`, or null where it is not one of the
  /// above.
  llvm::Value *of(llvm::Value *value) {
    if (auto it = known_.find(value); it != known_.end())
      return it->second;
    llvm::Value *lane = compute(value);
    known_[value] = lane;
    return lane;
  }

  /// Whether a scalar recurrence was made (a phi, whatever else changed).
  bool madeRecurrences() const { return madeRecurrences_; }

 private:
  static constexpr int kMaxDepth = 16;

  /// The integer operations built on lanes 0.
  static bool lanewise(const llvm::BinaryOperator *binary) {
    switch (binary->getOpcode()) {
    case llvm::Instruction::Add:
    case llvm::Instruction::Sub:
    case llvm::Instruction::Mul:
    case llvm::Instruction::Shl:
      return true;
    default:
      return false;
    }
  }

  /// Lane 0 of a value the same in every lane: a constant or a splat.
  static llvm::Value *uniform(llvm::Value *value) {
    if (auto *constant = llvm::dyn_cast<llvm::Constant>(value))
      return constant->getAggregateElement(0u);
    return llvm::getSplatValue(value);
  }

  llvm::Value *compute(llvm::Value *value) {
    if (llvm::Value *lane = uniform(value))
      return lane;
    if (auto *phi = llvm::dyn_cast<llvm::PHINode>(value))
      return recurrence(phi);
    auto *inst = llvm::dyn_cast<llvm::Instruction>(value);
    if (!inst || inst->isTerminator())
      return nullptr;
    if (auto *binary = llvm::dyn_cast<llvm::BinaryOperator>(inst)) {
      if (!lanewise(binary))
        return nullptr;
      llvm::Value *lhs = of(binary->getOperand(0)), *rhs = of(binary->getOperand(1));
      if (!lhs || !rhs)
        return nullptr;
      llvm::IRBuilder<> b(binary->getNextNode());
      llvm::Value *lane = b.CreateBinOp(binary->getOpcode(), lhs, rhs, binary->getName() + ".lane0");
      if (auto *laneInst = llvm::dyn_cast<llvm::Instruction>(lane))
        laneInst->copyIRFlags(binary);
      return lane;
    }
    if (auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(inst)) {
      auto scalarOf = [&](llvm::Value *operand) -> llvm::Value * {
        return operand->getType()->isVectorTy() ? of(operand) : operand;
      };
      llvm::Value *base = scalarOf(gep->getPointerOperand());
      llvm::SmallVector<llvm::Value *> indices;
      for (llvm::Value *index : gep->indices())
        indices.push_back(scalarOf(index));
      if (!base || llvm::is_contained(indices, nullptr))
        return nullptr;
      llvm::IRBuilder<> b(gep->getNextNode());
      return b.CreateGEP(gep->getSourceElementType(), base, indices, gep->getName() + ".lane0",
                         gep->getNoWrapFlags());
    }
    return nullptr;
  }

  /// Whether lane 0 of `value` is one of the forms `compute` builds, with
  /// the phis of `assumed` taken as computable (a recurrence through them).
  static bool computable(llvm::Value *value, llvm::SmallPtrSetImpl<llvm::PHINode *> &assumed, int depth = 0) {
    if (depth > kMaxDepth)
      return false;
    if (uniform(value))
      return true;
    if (auto *phi = llvm::dyn_cast<llvm::PHINode>(value)) {
      if (assumed.contains(phi))
        return true;
      if (phi->getNumIncomingValues() != 2)
        return false;
      assumed.insert(phi);
      return computable(phi->getIncomingValue(0), assumed, depth + 1) &&
             computable(phi->getIncomingValue(1), assumed, depth + 1);
    }
    if (auto *binary = llvm::dyn_cast<llvm::BinaryOperator>(value))
      return lanewise(binary) && computable(binary->getOperand(0), assumed, depth + 1) &&
             computable(binary->getOperand(1), assumed, depth + 1);
    if (auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(value))
      return llvm::all_of(gep->operands(), [&](llvm::Value *operand) {
        return !operand->getType()->isVectorTy() || computable(operand, assumed, depth + 1);
      });
    return false;
  }

  /// A phi of two incoming vectors (a loop's induction, as the vectoriser
  /// widens it: [<0, 1, ...>, preheader], [phi + steps, latch]): the scalar
  /// phi of their lanes 0. Operations are lane by lane, so lane 0 of the
  /// recurrence is the recurrence of lanes 0.
  llvm::Value *recurrence(llvm::PHINode *phi) {
    llvm::SmallPtrSet<llvm::PHINode *, 4> assumed;
    if (!computable(phi, assumed))
      return nullptr;
    llvm::Type *laneType = llvm::cast<llvm::VectorType>(phi->getType())->getElementType();
    auto *lane = llvm::PHINode::Create(laneType, 2, phi->getName() + ".lane0", phi->getIterator());
    known_[phi] = lane;  // before the incoming values' lanes, which may read it
    for (unsigned i = 0; i < 2; ++i)
      lane->addIncoming(of(phi->getIncomingValue(i)), phi->getIncomingBlock(i));
    madeRecurrences_ = true;
    return lane;
  }

  llvm::DenseMap<llvm::Value *, llvm::Value *> known_;
  bool madeRecurrences_ = false;
};

/// Whether `extract` reads lane 0 of a vector of integers or pointers.
bool extractsFirstLane(const llvm::ExtractElementInst *extract) {
  auto *index = llvm::dyn_cast<llvm::ConstantInt>(extract->getIndexOperand());
  llvm::Type *element = extract->getVectorOperandType()->getElementType();
  return index && index->isZero() && (element->isIntegerTy() || element->isPointerTy());
}

struct FirstLaneScalars : llvm::PassInfoMixin<FirstLaneScalars> {
  llvm::PreservedAnalyses run(llvm::Function &fn, llvm::FunctionAnalysisManager &) {
    llvm::SmallVector<llvm::ExtractElementInst *> extracts;
    for (llvm::Instruction &inst : llvm::instructions(fn))
      if (auto *extract = llvm::dyn_cast<llvm::ExtractElementInst>(&inst); extract && extractsFirstLane(extract))
        extracts.push_back(extract);
    FirstLanes lanes;
    bool changed = false;
    for (llvm::ExtractElementInst *extract : extracts) {
      llvm::Value *lane = lanes.of(extract->getVectorOperand());
      if (!lane)
        continue;
      extract->replaceAllUsesWith(lane);
      extract->eraseFromParent();
      changed = true;
    }
    if (!changed && !lanes.madeRecurrences())
      return llvm::PreservedAnalyses::all();
    llvm::PreservedAnalyses kept;
    kept.preserveSet<llvm::CFGAnalyses>();
    return kept;
  }
};

} // namespace

void registerFirstLaneScalarPasses(llvm::PassBuilder &pb) {
  registerPass<FirstLaneScalars>(pb, "kiln-first-lane-scalars");
}

} // namespace kiln::jit::cpu
