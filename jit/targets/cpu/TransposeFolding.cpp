//===- TransposeFolding.cpp - Matmuls read transposed operands in place -*- C++ -*-===//

#include "jit/targets/cpu/TransposeFolding.h"

#include "jit/targets/cpu/CpuTransforms.h"
#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// The buffer a memref views (through views and transposes).
Value bufferOf(Value v) { return extentOf(v).base; }

enum class Use { None, Reads, Overwrites, Other };

/// What `op` does to `buffer`: nothing, only reads it, writes all of it
/// without reading it (a linalg op with the buffer itself as its one init,
/// all loops parallel, a permutation map, a payload that ignores the init),
/// or anything else.
Use useOf(Operation *op, Value buffer) {
  bool touches = false;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      touches |= isa<MemRefType>(v.getType()) && bufferOf(v) == buffer;
  });
  if (!touches || isa<ViewLikeOpInterface, memref::TransposeOp>(op))
    return Use::None;  // taking a view reads and writes nothing
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics())
    return Use::Other;
  bool written = false, read = false;
  for (OpOperand &operand : linalgOp->getOpOperands())
    if (bufferOf(operand.get()) == buffer)
      (linalgOp.isDpsInit(&operand) ? written : read) = true;
  if (!written)
    return Use::Reads;
  if (read || linalgOp.getNumDpsInits() != 1)
    return Use::Other;
  OpOperand *init = linalgOp.getDpsInitOperand(0);
  if (init->get() != buffer || !linalgOp.isAllParallelLoops() ||
      !linalgOp.getMatchingIndexingMap(init).isPermutation() || linalgOp.payloadUsesValueFromOperand(init))
    return Use::Other;
  return Use::Overwrites;
}

/// The permutation that swaps the last two of `rank` dimensions.
SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

/// Folds the copy feeding input `index` of `matmul`; false when it may not.
bool foldOperand(linalg::LinalgOp matmul, unsigned index) {
  Value temp = matmul.getDpsInputs()[index];
  // The temporary is the kernel's own, or one of its arguments: bufferization
  // places a transposed temporary in an out-param that a later op fills with
  // a result (the backward's dW), and the kernel writes no other argument.
  auto alloc = temp.getDefiningOp<memref::AllocOp>();
  auto argument = dyn_cast<BlockArgument>(temp);
  const bool inArgument = argument && argument.getOwner() == matmul->getBlock() &&
                          isa<func::FuncOp>(argument.getOwner()->getParentOp());
  if (!inArgument && (!alloc || alloc->getBlock() != matmul->getBlock()))
    return false;
  // The last op before the matmul to touch the temporary fills it by
  // transposing its last two dimensions.
  linalg::TransposeOp copy;
  for (Operation *op = matmul->getPrevNode(); op; op = op->getPrevNode()) {
    if (useOf(op, temp) == Use::None)
      continue;
    auto transpose = dyn_cast<linalg::TransposeOp>(op);
    const int64_t rank = cast<MemRefType>(temp.getType()).getRank();
    if (transpose && transpose.hasPureBufferSemantics() && transpose.getInit() == temp &&
        llvm::equal(transpose.getPermutation(), swapLastTwo(rank)))
      copy = transpose;
    break;
  }
  if (!copy)
    return false;
  Value source = copy.getInput();
  const Value sourceBuffer = bufferOf(source);
  // The source keeps its values until the matmul, which reads the temporary
  // only as this operand and does not write the source.
  for (Operation *op = copy->getNextNode(); op != matmul.getOperation(); op = op->getNextNode())
    if (Use u = useOf(op, sourceBuffer); u != Use::None && u != Use::Reads)
      return false;
  for (OpOperand &operand : matmul->getOpOperands())
    if ((operand.getOperandNumber() != index && bufferOf(operand.get()) == temp) ||
        (matmul.isDpsInit(&operand) && bufferOf(operand.get()) == sourceBuffer))
      return false;
  // Nothing after the matmul reads what the copy wrote. An argument is read
  // by the caller after the kernel returns, so some op must overwrite it.
  bool overwritten = false;
  for (Operation *op = matmul->getNextNode(); op; op = op->getNextNode()) {
    const Use u = useOf(op, temp);
    if (u == Use::None)
      continue;
    if (u != Use::Overwrites)
      return false;
    overwritten = true;
    break;
  }
  if (inArgument && !overwritten)
    return false;
  // The view goes where the copy was: a zero fill of the matmul's output
  // right before it must stay there (kiln-cpu-matmul-to-runtime-calls folds it).
  OpBuilder b(copy);
  const SmallVector<int64_t> perm = swapLastTwo(cast<MemRefType>(temp.getType()).getRank());
  SmallVector<unsigned> dims(perm.begin(), perm.end());
  Value view = memref::TransposeOp::create(b, copy.getLoc(), source,
                                           AffineMapAttr::get(AffineMap::getPermutationMap(dims, b.getContext())));
  matmul->setOperand(index, view);
  copy.erase();
  if (alloc && alloc->use_empty())
    alloc.erase();
  return true;
}

} // namespace

int foldTransposesIntoMatmuls(func::FuncOp kernel) {
  SmallVector<linalg::LinalgOp> matmuls;
  kernel.walk([&](linalg::LinalgOp op) {
    auto matmul = dyn_cast<linalg::MatmulOp>(op.getOperation());
    auto batched = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
    if ((!matmul && !batched) || (matmul && matmul.hasUserDefinedMaps()) ||
        (batched && batched.hasUserDefinedMaps()) || !op.hasPureBufferSemantics() ||
        !isRuntimeMatmulOperands(op))
      return;
    matmuls.push_back(op);
  });
  int folded = 0;
  for (linalg::LinalgOp matmul : matmuls)
    for (unsigned index : {0u, 1u})
      folded += foldOperand(matmul, index);
  return folded;
}

} // namespace kiln::jit::cpu
