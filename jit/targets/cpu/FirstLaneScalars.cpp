//===- FirstLaneScalars.cpp - First lanes of vector inductions ------------===//

#include "jit/targets/cpu/FirstLaneScalars.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/ValueHandle.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {
namespace {

/// Lane 0 of integer and pointer vectors as scalars, each built once, right
/// after the vector it stands for (so it dominates whatever that vector
/// dominates), from: constants, splats, phis of two such values (the
/// inductions of loop headers), and adds, subtractions, multiplies, shifts
/// left and GEPs of those. Whether a value has such a lane 0 is decided for
/// all it reads before anything is built (`computable`), so a value that
/// has none leaves the IR as it was.
class FirstLanes {
 public:
  /// The scalar of lane 0 of `value`, or null where it is not one of the
  /// above.
  llvm::Value *of(llvm::Value *value) {
    if (llvm::Value *lane = memo(value))
      return lane;
    llvm::DenseMap<llvm::Value *, Visit> visits;
    int budget = kMaxVisits;
    if (!computable(value, visits, budget))
      return nullptr;
    return build(value);
  }

  /// Whether any scalar was built (the IR changed, whatever was replaced).
  bool builtAny() const { return builtAny_; }

 private:
  /// Values one decision may visit: a kernel's index arithmetic is a few
  /// dozen; this bounds the work on anything else.
  static constexpr int kMaxVisits = 256;

  enum class Visit : uint8_t { InProgress, Yes, No };

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

  /// The lane already built for `value` (a handle: an extract replaced
  /// since, say the scalar a splat was made of, is followed to its
  /// replacement).
  llvm::Value *memo(llvm::Value *value) const {
    auto it = known_.find(value);
    return it == known_.end() ? nullptr : static_cast<llvm::Value *>(it->second);
  }

  /// Whether lane 0 of `value` is one of the forms `build` makes. Each value
  /// is visited once: a phi met again on a cycle counts as computable (its
  /// lane is the recurrence being decided), any other value met again on a
  /// cycle (only unreachable code has such) does not; at most `budget`
  /// values in all.
  bool computable(llvm::Value *value, llvm::DenseMap<llvm::Value *, Visit> &visits, int &budget) {
    if (memo(value) || uniform(value))
      return true;
    if (auto it = visits.find(value); it != visits.end())
      return it->second == Visit::Yes || (it->second == Visit::InProgress && llvm::isa<llvm::PHINode>(value));
    if (--budget < 0)
      return false;
    visits[value] = Visit::InProgress;
    bool yes = false;
    auto operandsComputable = [&](auto &&operands) {
      return llvm::all_of(operands, [&](llvm::Value *operand) {
        return !operand->getType()->isVectorTy() || computable(operand, visits, budget);
      });
    };
    if (auto *phi = llvm::dyn_cast<llvm::PHINode>(value))
      yes = phi->getNumIncomingValues() == 2 && operandsComputable(phi->incoming_values());
    else if (auto *binary = llvm::dyn_cast<llvm::BinaryOperator>(value))
      yes = lanewise(binary) && computable(binary->getOperand(0), visits, budget) &&
            computable(binary->getOperand(1), visits, budget);
    else if (auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(value))
      yes = operandsComputable(gep->operands());
    visits[value] = yes ? Visit::Yes : Visit::No;
    return yes;
  }

  /// Lane 0 of a value `computable` accepted (or one that value reads).
  llvm::Value *build(llvm::Value *value) {
    if (llvm::Value *lane = memo(value))
      return lane;
    llvm::Value *lane = uniform(value);
    if (!lane) {
      if (auto *phi = llvm::dyn_cast<llvm::PHINode>(value)) {
        // The phi of the incoming values' lanes 0; made first, so that the
        // lanes of the values on its cycle read it.
        auto *scalar = llvm::PHINode::Create(llvm::cast<llvm::VectorType>(phi->getType())->getElementType(), 2,
                                             phi->getName() + ".lane0", phi->getIterator());
        known_[phi] = scalar;
        for (unsigned i = 0; i < 2; ++i)
          scalar->addIncoming(build(phi->getIncomingValue(i)), phi->getIncomingBlock(i));
        builtAny_ = true;
        return scalar;
      }
      auto *inst = llvm::cast<llvm::Instruction>(value);
      if (auto *binary = llvm::dyn_cast<llvm::BinaryOperator>(inst)) {
        llvm::Value *lhs = build(binary->getOperand(0)), *rhs = build(binary->getOperand(1));
        llvm::IRBuilder<> b(inst->getNextNode());
        lane = b.CreateBinOp(binary->getOpcode(), lhs, rhs, binary->getName() + ".lane0");
        if (auto *laneInst = llvm::dyn_cast<llvm::Instruction>(lane))
          laneInst->copyIRFlags(binary);
      } else {
        auto *gep = llvm::cast<llvm::GetElementPtrInst>(inst);
        auto scalarOf = [&](llvm::Value *operand) {
          return operand->getType()->isVectorTy() ? build(operand) : operand;
        };
        llvm::Value *base = scalarOf(gep->getPointerOperand());
        llvm::SmallVector<llvm::Value *> indices;
        for (llvm::Value *index : gep->indices())
          indices.push_back(scalarOf(index));
        llvm::IRBuilder<> b(inst->getNextNode());
        lane = b.CreateGEP(gep->getSourceElementType(), base, indices, gep->getName() + ".lane0",
                           gep->getNoWrapFlags());
      }
      builtAny_ = true;
    }
    known_[value] = lane;
    return lane;
  }

  llvm::DenseMap<llvm::Value *, llvm::WeakTrackingVH> known_;
  bool builtAny_ = false;
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
    // Lanes first, then the replacements, through handles: a lane may be an
    // extract replaced meanwhile (the scalar of a splat).
    FirstLanes lanes;
    llvm::SmallVector<std::pair<llvm::ExtractElementInst *, llvm::WeakTrackingVH>> replacements;
    for (llvm::ExtractElementInst *extract : extracts)
      if (llvm::Value *lane = lanes.of(extract->getVectorOperand()))
        replacements.emplace_back(extract, lane);
    bool changed = false;
    for (auto &[extract, lane] : replacements) {
      if (!lane || lane == extract)
        continue;
      extract->replaceAllUsesWith(lane);
      changed = true;
    }
    for (auto &[extract, lane] : replacements)
      if (extract->use_empty())
        extract->eraseFromParent();
    return keptAnalyses(changed || lanes.builtAny());
  }
};

} // namespace

void registerFirstLaneScalarPasses(llvm::PassBuilder &pb) {
  registerPass<FirstLaneScalars>(pb, "kiln-first-lane-scalars");
}

} // namespace kiln::jit::cpu
