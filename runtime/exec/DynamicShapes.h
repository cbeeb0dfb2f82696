// DynamicShapes: one kernel for a trace structure run at many sizes.
//
// Kernels are specialised to concrete shapes. When one trace structure
// (TraceKey::structureHash: same ops, attributes, dtypes, ranks, aliasing and
// live outputs) is seen with more than KILN_MAX_SHAPES shapes, the engine
// compiles one dynamic-shape kernel for it instead of one kernel per shape:
//
//  - the extents that varied between the shapes seen are dynamic, the others
//    static (an extent that was 1 every time stays 1, so broadcasting is
//    fixed); dynamic extents that took equal values in every shape seen are
//    one size (the batch size of every value that has it);
//  - later traces of the structure whose shapes fit that pattern (static
//    extents equal, each size consistent and non-zero) run the kernel; the
//    runtime passes the sizes after the scratch buffer (Executable.h);
//  - traces that do not fit stay interpreted (logged per trace key);
//  - a structure whose ops cannot share one kernel across sizes (an operand
//    that would broadcast at run time, concat over dynamic extents, an index
//    op over a dynamic axis, ...) gets no dynamic kernel (the reason is
//    logged once): the storm guard then keeps its further shapes
//    interpreted once KILN_MAX_SHAPES of them have static kernels.
//
// Plain C++ over traces; the engine calls it under its lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/exec/Executable.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceGraph.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec {

/// The dynamic-shape kernel of one structure.
struct DynamicKernel {
  enum class State : uint8_t { Compiling, Ready, Failed };
  State state = State::Compiling;
  /// The needed nodes of the structure; extents < 0 are dynamic (size
  /// number -1 - extent).
  trace::TraceGraph graph;
  int sizes = 0;
  /// Scalar arguments (ScalarArgs.h): the last graph inputs.
  size_t scalarArgs = 0;
  /// Index range checks (see TraceProfile::indexChecks): their axes are static.
  std::vector<std::pair<uint32_t, int64_t>> indexChecks;
  trace::TraceKey key;  ///< kernel cache key (distinct from every static key)
  std::shared_ptr<Executable> executable;
  std::string failure;  ///< why there is none (Failed)
};

/// What the engine knows about one structure.
struct StructureShapes {
  /// Extents of the needed nodes (flattened) of each distinct shape seen.
  std::vector<std::vector<int64_t>> samples;
  /// Set once the structure has more than KILN_MAX_SHAPES shapes.
  std::shared_ptr<DynamicKernel> kernel;
};

class DynamicShapes {
 public:
  /// Records the shapes of a trace key seen for the first time. True exactly
  /// once per structure: when it now has more than `maxShapes` shapes (the
  /// caller then plans the dynamic-shape kernel with plan()).
  bool noteNewShape(uint64_t structure, const trace::Trace& trace, const std::vector<uint8_t>& needed,
                    int64_t maxShapes);
  /// The structure's dynamic-shape kernel (null until it has one).
  std::shared_ptr<DynamicKernel> kernelOf(uint64_t structure) const;
  /// Plans the structure's kernel from the shapes seen and `trace` (one of
  /// them): the graph with dynamic extents, the sizes and the cache key.
  /// `indexChecks` null means the trace cannot be compiled (`reason`). The
  /// kernel is registered Compiling, or Failed with the reason. `scalarArgs`:
  /// the trace's scalar arguments (ScalarSlots::argNodes of its key).
  std::shared_ptr<DynamicKernel> plan(uint64_t structure, const trace::Trace& trace,
                                      const std::vector<uint8_t>& needed, std::span<const uint32_t> scalarArgs,
                                      const std::vector<std::pair<uint32_t, int64_t>>* indexChecks,
                                      const std::string& reason);
  /// True while the structure's dynamic-shape kernel is compiling or ready:
  /// its new shapes then get no static kernels.
  /// Registers a kernel planned by planFromCachedKey() and loaded, Ready.
  void adopt(uint64_t structure, std::shared_ptr<DynamicKernel> kernel) { structures_[structure].kernel = std::move(kernel); }
  bool coveredByKernel(uint64_t structure) const {
    auto kernel = kernelOf(structure);
    return kernel && kernel->state != DynamicKernel::State::Failed;
  }
  void clear() { structures_.clear(); }
  /// Forgets every structure not in `live` (those with no trace key left
  /// after the engine trimmed its profiles). A kernel being compiled stays
  /// with its job.
  void retain(const std::unordered_set<uint64_t>& live) {
    std::erase_if(structures_, [&](const auto& entry) { return !live.contains(entry.first); });
  }
  size_t size() const { return structures_.size(); }

 private:
  std::unordered_map<uint64_t, StructureShapes> structures_;
};

/// The dynamic-shape kernel an earlier process compiled and cached for
/// `trace`'s structure (KILN_JIT=replay): `keyWords` are the cached entry's
/// key, from which the pattern (which extents are sizes) is read back onto
/// `trace`'s graph. Null when the graph rebuilt from that pattern does not
/// have exactly this key (another structure's entry, or damaged words).
std::shared_ptr<DynamicKernel> planFromCachedKey(uint64_t structure, const trace::Trace& trace,
                                                 const std::vector<uint8_t>& needed,
                                                 std::span<const uint32_t> scalarArgs,
                                                 const std::vector<uint64_t>& keyWords,
                                                 std::vector<std::pair<uint32_t, int64_t>> indexChecks);

/// Why the graph's ops cannot run with its dynamic extents ("" when they can).
std::string checkDynamicSupport(const trace::TraceGraph& graph);

/// The sizes of `trace` (needed nodes) for `kernel`: false and `*why` when
/// the trace does not fit the kernel's pattern, or when its scalar
/// arguments (`scalarArgs`) are not exactly the kernel's.
bool bindDynamicSizes(const DynamicKernel& kernel, const trace::Trace& trace, const std::vector<uint8_t>& needed,
                      std::span<const uint32_t> scalarArgs, std::vector<int64_t>* sizes, std::string* why);

}  // namespace kiln::exec
