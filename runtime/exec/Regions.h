// Hot regions: the one rule that partitions a flushed trace into fusible
// regions, and each region as a small trace of its own (keyed, compiled and
// cached exactly like whole traces). The engine counts hotness per region key
// and runs a trace as a mix of compiled regions and interpreted nodes
// (RegionExecutor.cpp); see "Hot regions" in DESIGN.md.
//
// The rule, in recording order over the needed nodes:
//  - Param nodes belong to no region (they are the trace's inputs).
//  - A boundary node (RegionBoundaries below: a collective, which the
//    compiler does not lower; on a device whose op library runs them
//    better, a matmul, conv2d, row reduction, index_add, scatter_add or
//    cumsum) closes the open region and runs
//    alone, interpreted, between the region before it and the one after it:
//    a trace with collectives runs as compiled regions around them, and a
//    CUDA trace as fused kernels around cuBLASLt calls.
//  - A slice of a value from outside the open region, and any view (slice,
//    reshape, permute, broadcast_to) of such a loose node, is a *loose* node:
//    the interpreter runs it (a view costs nothing) before the region. So
//    `slice(xs, t)` inside a loop body does not put the offset `t` into the
//    body's key. Other views of outside values join the region (the kernel
//    then reads the original buffer, with no copy).
//  - Every other node joins the open region, except that a new region starts
//    before a matmul that depends, inside the open region, on a matmul of it
//    (so `h = tanh(h @ W + x_t @ U + b)` is one region per step: a matmul with
//    its producers and epilogue), and before a node that would make the region
//    longer than kMaxRegionNodes. At a matmul cut, the nodes recorded after
//    the last value the matmul reads from the open region that read nothing
//    staying there (the next step's `x_t @ U` recorded first) move to the new
//    region, so each step of a loop gets the same region in either order.
// Regions are ranges of recording order (loose nodes aside), so running the
// steps of a plan in order is always a valid schedule.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/device.h"
#include "runtime/core/OpKind.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec {

struct TraceProfile;

/// Nodes a region holds at most (compile time and reuse both favour small ones).
inline constexpr uint32_t kMaxRegionNodes = 48;

/// Plan ids are positions among the trace's needed nodes (Params included),
/// so one plan serves every trace of one TraceKey, whatever their dead nodes.
struct Region {
  std::vector<uint32_t> nodes;    ///< in recording order
  std::vector<uint32_t> inputs;   ///< values read from outside, in first-use order: kernel inputs
  std::vector<uint32_t> outputs;  ///< values read after the region or live, in node order: kernel outputs
  uint32_t ops = 0;               ///< nodes (all ops: Params are never in a region)
  /// False for a region of constants only (nothing worth a kernel): it is
  /// not keyed, counted or compiled.
  bool keyed = false;
  trace::TraceKey key;
  /// The region key's profile (set by the engine; held, so a plan's regions
  /// outlive their keys' eviction from the engine's table).
  std::shared_ptr<TraceProfile> profile;
};

/// Steps run in order; each covers [begin, end) of RegionPlan::order and is
/// one region (`region >= 0`) or loose nodes run by the interpreter (-1).
struct RegionStep {
  int32_t region = -1;
  uint32_t begin = 0, end = 0;
};

struct RegionPlan {
  std::vector<Region> regions;
  /// Every needed node in execution order (Params first).
  std::vector<uint32_t> order;
  std::vector<RegionStep> steps;
  /// Per needed node: position in `order` of its last reader (its own
  /// position when none); values are freed after it unless live.
  std::vector<uint32_t> lastUse;
  uint32_t keyedRegions = 0;
  /// Per region: how often its key occurs in the plan; and the share of the
  /// trace's estimated work (TieringPolicy.h) that the regions whose key
  /// occurs more than once carry, 0..1.
  std::vector<uint32_t> keyOccurrences;
  double recurringWorkShare = 0;
};

/// The nodes that run alone, interpreted, between compiled regions on one
/// device (and so keep a trace that has them from compiling whole):
/// collectives everywhere (the compiler does not lower them); where the
/// device's compile target says its op library runs them better than a
/// kernel compiled for it (CompileTarget.h: CUDA), matmul and conv2d
/// (cuBLASLt) and reductions along a contiguous innermost axis of 32 or more
/// (a warp per output; the GPU pipeline's loop nests give a thread per
/// output, whose loads do not coalesce); on GPUs, index_add, scatter_add and
/// cumsum (tier 0 adds each source row once; compiled, each result element
/// scans the index).
///
/// An f32 library matmul's bias add runs with it, in its call where the
/// library can (OpLibrary::matmulWithEpilogue: cuBLASLt's bias epilogue),
/// else right after it: the add of a vector along the last axis that is
/// the product's only reader; so do the leaves recorded between them (a bias
/// parameter, a constant), which the interpreter runs first. A relu after it
/// joins the next region: whether cuBLASLt's relu may take it depends on
/// a probe of the device's library (CublasLtMatmul.h), and a plan (so the
/// regions' cache keys) must not, or kernels compiled where the answer
/// differs would not replay.
class RegionBoundaries {
 public:
  explicit RegionBoundaries(Device device);
  bool contains(const trace::Trace& trace, const trace::Node& n) const;

  /// Per needed node (plan ids; `ids` = neededNodes, `planId` its inverse
  /// over trace node ids): kEpilogueOp for a library matmul's bias add,
  /// kEpilogueLeaf for a leaf recorded between the two, 0 otherwise.
  static constexpr uint8_t kEpilogueOp = 1, kEpilogueLeaf = 2;
  std::vector<uint8_t> matmulEpilogues(const trace::Trace& trace, const std::vector<uint32_t>& ids,
                                       const std::vector<uint32_t>& planId) const;

 private:
  bool libraryMatmuls_ = false;
  bool libraryRowReductions_ = false;
  bool libraryOrderedAdditions_ = false;
};

/// Needed node ids of `trace` in recording order (plan id -> trace node id).
std::vector<uint32_t> neededNodes(const std::vector<uint8_t>& needed);

/// Partitions the needed nodes of `trace` (the rule above) and keys each
/// region. `ids` = neededNodes(needed). `scalarArgs` (trace node ids,
/// ascending) are the constants the trace's key leaves out (ScalarArgs.h):
/// they stay outside every region, interpreted, so that region keys and
/// kernels do not hold their values either.
RegionPlan partitionRegions(const trace::Trace& trace, const std::vector<uint32_t>& ids,
                            std::span<const uint32_t> scalarArgs = {});

/// The region as a trace of its own: one Param per input (dense layout, in
/// Region::inputs order), then the region's nodes; its outputs are live.
/// Keyed with cache::encodeTraceKey and compiled with extractGraph like any trace.
trace::Trace regionTrace(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region);

}  // namespace kiln::exec
