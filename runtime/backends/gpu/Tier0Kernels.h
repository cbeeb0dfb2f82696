// The tier-0 GPU kernels (CUDA and Level Zero): which kernels exist, their entry names and their
// parameters. One list, read by the build-time generator
// (tools/kiln-gpu-kernels writes their PTX and SPIR-V with Kiln's MLIR pipeline), by the
// GPU op libraries (Tier0OpLibrary.h: which launch them) and by the test drivers (which check
// launches against it). Plain C++: no MLIR, no driver.
//
// Every kernel is elementwise over a dense or strided index space of `n`
// elements and takes only 8-byte parameters, in this order:
//   out pointer, input pointers (inputCount), n (i64), then
//   Rank1:   one element stride per operand that has strides
//   RankN:   kRank extents (leading ones padded with 1), then kRank element
//            strides per operand that has strides (padded with 0).
// Operands with strides: the inputs, and the output for Copy (copyInto
// writes a strided destination); other outputs are dense. Leaves take the
// out pointer, n and: Fill the element's bit pattern (i64); Arange start and
// step (f64 bit patterns); Random the seed. Reduce (RankN only) takes
//   out, in, nOut, kRank output extents, kRank input strides of those axes,
//   m (elements reduced into each output), kRank reduced extents, kRank
//   input strides of the reduced axes. Take (index_select and gather; RankN
//   only) takes out, x, index (i64), n, kRank output extents, kRank x strides
//   per output axis, kRank index strides per output axis, and x's stride
//   along the indexed axis: out[c] = x[sum c*xs + index[sum c*is] * axisStride].
//   ArgReduce (argmax/argmin; RankN only) takes out (i64), in, nOut, kRank
//   output extents, kRank input strides of those axes, the reduced axis's
//   extent and stride, the first index scanned and the direction (+1, or -1
//   to select the last extreme). Contract (matmul; RankN only) takes out, a,
//   b, n, kRank output extents, kRank a strides and kRank b strides per
//   output axis, K, and a's and b's strides along K:
//   out[c] = sum_k a[sum c*as + k*ak] * b[sum c*bs + k*bk] (a dot product per
//   output element: tier 0's matmul where cuBLASLt is not there).
//   IndexAdd (cumsum's ordered additions: a source that reads out; RankN
//   only) takes out (holding x already), source, index (i64, on the device),
//   n (the positions of one row of out: its shape with extent 1 along the
//   axis), kRank extents of those positions, kRank out strides and kRank
//   source strides of them, the index's length, and out's and source's
//   strides along the axis: each position adds source[pos, i] into
//   out[pos, index[i]] for i in order, so every element of out receives its
//   additions in the host's order, each rounded as the host rounds it.
//   IndexAddRows (index_add and scatter_add whose source is not the output;
//   RankN only) takes IndexAdd's first 4 + 3 kRank parameters, but its index
//   operand is a table (i64) and n counts the threads, groups x rowN: then
//   rowN (the positions of one row), groups, and out's and source's strides
//   along the axis. The table holds the distinct target rows of the index
//   [0, groups), where each one's source rows start in the list that
//   follows [groups, 2 groups + 1), and that list [2 groups + 1, ...): the
//   source rows adding into each target, in index order. Thread i owns
//   position i % rowN of target row table[i / rowN] and adds that target's
//   source rows into it in order: the same additions in the same order as
//   IndexAdd's walk, but one thread per target row and position, each
//   reading only its own rows (an embedding's gradient over a large
//   vocabulary: work as the tokens, not the vocabulary times the tokens).
//   WarpReduce (CUDA only: SPIR-V has no fixed subgroup width; RankN only;
//   f32 and i32, the shuffles' width) takes Reduce's parameters and is the
//   same reduction with one warp of 32 lanes per output element (warps
//   grid-stride over nOut): along the innermost reduced axis, which must be
//   contiguous and at least 32 long, lane l folds elements l, l+32, ... of
//   each row in order (so the lanes' loads coalesce), then a butterfly of
//   xor-shuffles folds the lanes, and lane 0 stores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"
#include "runtime/core/OpKind.h"

namespace kiln::hal::tier0 {

inline constexpr int kRank = Shape::kMaxRank;

enum class Family : uint8_t {
  Unary, Binary, Compare, Where, Cast, Copy, Fill, Arange, Random, Reduce, Take, ArgReduce, Contract, WarpReduce,
  IndexAdd, IndexAddRows
};
/// Rank1: the index space is one strided axis; RankN: up to kRank axes.
enum class Layout : uint8_t { Rank1, RankN };

struct KernelSpec {
  Family family = Family::Unary;
  core::OpKind op = core::OpKind::Add;  ///< Unary, Binary, Compare, Random, Reduce
  DType in = DType::f32;                ///< data operands' dtype (Where: the branches'; Copy/Fill: by size)
  DType out = DType::f32;               ///< result dtype (Compare: boolean; Cast: the target)
  Layout layout = Layout::Rank1;

  /// "kiln_t0_unary_exp_f32_r1", "kiln_t0_cast_f16_f32_rn", "kiln_t0_copy_b4_rn".
  std::string entryName() const;
  int inputCount() const;
  /// Number of 8-byte parameters of the kernel.
  int paramCount() const;
  /// Does the output have strides of its own (Copy)?
  bool stridedOutput() const { return family == Family::Copy; }
  /// A leaf (no input; one dense rank-1 index space)?
  bool isLeaf() const { return family == Family::Fill || family == Family::Arange || family == Family::Random; }
};

/// The dtype that stands for "elements of `bytes` bytes" in Copy and Fill
/// kernels (u8, f16, i32, i64).
DType dtypeOfSize(std::size_t bytes);

/// Every tier-0 kernel, in a fixed order. Compute kernels exist for the
/// dtypes the op table accepts, without f16/bf16 (the interpreter computes
/// those in f32); Cast covers every pair of dtypes; Copy and Fill every
/// element size; Arange every dtype; Random every float dtype; Reduce (sum,
/// prod, max, min) the dtypes the op table accepts, without f16/bf16; Take
/// every element size; ArgReduce every dtype but f16/bf16; Contract the
/// numeric dtypes but f16/bf16; WarpReduce sum, prod, max and min for f32
/// and i32; IndexAdd and IndexAddRows the numeric dtypes index_add accepts (f16 and bf16
/// add in f32 and round each sum back, as the interpreter does; the API's
/// cumsum widens halves and small integers first, so only a direct use of
/// the library walks those).
const std::vector<KernelSpec>& allKernels();

}  // namespace kiln::hal::tier0
