#include "runtime/exec/Regions.h"

#include <algorithm>

#include "runtime/backends/Hal.h"
#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/core/ShapeRules.h"

namespace kiln::exec {

namespace {

using core::OpKind;

bool isView(OpKind op) {
  return op == OpKind::Slice || op == OpKind::Reshape || op == OpKind::Permute || op == OpKind::BroadcastTo;
}

bool isLeaf(OpKind op) { return core::opCategory(op) == core::OpCategory::Leaf; }

/// Marks a region trace's outputs: encodeTraceKey and extractGraph only ask
/// whether a node has a holder, never read it.
char gLiveMarker;

/// regionTrace with the plan-id map and a scratch map (plan id -> sub-trace
/// node; only the region's entries are written, then read) supplied, so that
/// partitioning a long trace stays linear.
trace::Trace buildRegionTrace(const trace::Trace& trace, const std::vector<uint32_t>& ids,
                              const std::vector<uint32_t>& planId, std::vector<uint32_t>& local,
                              const Region& region) {
  trace::Trace sub;
  sub.device = trace.device;
  const size_t size = region.inputs.size() + region.nodes.size();
  sub.nodes.reserve(size);
  sub.holders.assign(size, nullptr);
  for (uint32_t q : region.inputs) {
    const trace::Node& src = trace.nodes[ids[q]];
    trace::Node param{};
    param.op = OpKind::Param;
    param.dtype = src.dtype;
    param.shape = src.shape;
    param.i0 = static_cast<int64_t>(sub.params.size());
    trace::Param in;
    core::contiguousStrides(src.shape, in.view.strides);  // kernels take dense inputs
    sub.params.push_back(std::move(in));
    local[q] = static_cast<uint32_t>(sub.nodes.size());
    sub.nodes.push_back(param);
  }
  size_t out = 0;
  for (uint32_t p : region.nodes) {
    trace::Node n = trace.nodes[ids[p]];
    const auto ins = trace.inputsOf(n);
    const auto attrs = trace.attrsOf(n);
    n.inputs = static_cast<uint32_t>(sub.operands.size());
    for (uint32_t in : ins) sub.operands.push_back(local[planId[in]]);
    n.attrs = static_cast<uint32_t>(sub.attrs.size());
    sub.attrs.insert(sub.attrs.end(), attrs.begin(), attrs.end());
    local[p] = static_cast<uint32_t>(sub.nodes.size());
    if (out < region.outputs.size() && region.outputs[out] == p) {
      sub.holders[sub.nodes.size()] = reinterpret_cast<detail::TensorImpl*>(&gLiveMarker);
      ++out;
    }
    sub.nodes.push_back(n);
    ++sub.opCount;
  }
  return sub;
}

}  // namespace

std::vector<uint32_t> neededNodes(const std::vector<uint8_t>& needed) {
  std::vector<uint32_t> ids;
  ids.reserve(needed.size());
  for (size_t i = 0; i < needed.size(); ++i)
    if (needed[i]) ids.push_back(static_cast<uint32_t>(i));
  return ids;
}

RegionBoundaries::RegionBoundaries(Device device) {
  const std::optional<CompileTarget> target = hal::deviceContext(device).compileTarget();
  libraryMatmuls_ = target && target->runsMatmulsInLibrary();
  libraryRowReductions_ = target && target->runsRowReductionsInLibrary();
  libraryOrderedAdditions_ = target && target->runsOrderedAdditionsInLibrary();
}

std::vector<uint8_t> RegionBoundaries::matmulEpilogues(const trace::Trace& trace, const std::vector<uint32_t>& ids,
                                                       const std::vector<uint32_t>& planId) const {
  const auto count = static_cast<uint32_t>(ids.size());
  std::vector<uint8_t> marks(count, 0);
  if (!libraryMatmuls_) return marks;
  // Readers among the needed nodes, and the last of them (plan ids).
  std::vector<uint32_t> readers(count, 0), reader(count, 0);
  for (uint32_t p = 0; p < count; ++p)
    for (uint32_t in : trace.inputsOf(trace.nodes[ids[p]])) {
      ++readers[planId[in]];
      reader[planId[in]] = p;
    }
  // `q`'s only reader, when q is not live and only leaves lie between them.
  auto soleReader = [&](uint32_t q) -> int64_t {
    if (readers[q] != 1 || trace.holders[ids[q]]) return -1;
    for (uint32_t x = q + 1; x < reader[q]; ++x)
      if (!isLeaf(trace.nodes[ids[x]].op)) return -1;
    return reader[q];
  };
  for (uint32_t p = 0; p < count; ++p) {
    const trace::Node& mm = trace.nodes[ids[p]];
    if (mm.op != OpKind::Matmul || mm.dtype != DType::f32) continue;
    uint32_t last = p;
    if (const int64_t r = soleReader(p); r >= 0) {
      const trace::Node& add = trace.nodes[ids[r]];
      const auto ins = trace.inputsOf(add);
      if (add.op == OpKind::Add && add.shape == mm.shape && planId[ins[0]] != planId[ins[1]]) {
        const trace::Node& bias = trace.nodes[planId[ins[0]] == p ? ins[1] : ins[0]];
        if (bias.dtype == mm.dtype && core::isLastAxisVector(bias.shape, mm.shape)) {
          marks[r] = kEpilogueOp;
          last = static_cast<uint32_t>(r);
        }
      }
    }
    for (uint32_t x = p + 1; x < last; ++x)
      if (!marks[x]) marks[x] = kEpilogueLeaf;
  }
  return marks;
}

bool RegionBoundaries::contains(const trace::Trace& trace, const trace::Node& n) const {
  if (n.op == OpKind::Param) return false;
  if (!core::opIsLowered(n.op)) return true;
  if (libraryMatmuls_ && (n.op == OpKind::Matmul || n.op == OpKind::Conv2d)) return true;
  if (libraryOrderedAdditions_ && (n.op == OpKind::IndexAdd || n.op == OpKind::ScatterAdd || n.op == OpKind::Cumsum))
    return true;
  if (libraryRowReductions_ && core::opCategory(n.op) == core::OpCategory::Reduce) {
    // The library's warp kernels: f32 and i32 (half types reduce in f32).
    const trace::Node& in = trace.nodes[trace.inputsOf(n)[0]];
    const int last = in.shape.rank() - 1;
    const bool warpType = in.dtype == DType::f32 || in.dtype == DType::i32 || in.dtype == DType::f16 ||
                          in.dtype == DType::bf16;
    if (!warpType || last < 0 || in.shape[last] < 32) return false;
    for (int64_t a : trace.attrsOf(n))
      if (a == last) return true;
  }
  return false;
}

RegionPlan partitionRegions(const trace::Trace& trace, const std::vector<uint32_t>& ids,
                            std::span<const uint32_t> scalarArgs) {
  const uint32_t count = static_cast<uint32_t>(ids.size());
  const RegionBoundaries boundaries(trace.device);
  RegionPlan plan;
  // Plan id of each trace node (only needed nodes are ever read).
  std::vector<uint32_t> planId(trace.nodes.size(), 0);
  for (uint32_t p = 0; p < count; ++p) planId[ids[p]] = p;

  constexpr int32_t kNone = -1, kLoose = -2;
  std::vector<int32_t> regionOf(count, kNone);
  std::vector<uint8_t> afterMatmul(count, 0);  ///< is or depends on a matmul of its region
  std::vector<uint8_t> moving(count, 0);       ///< moves to the next region at a cut
  std::vector<uint32_t> loose;                  ///< loose nodes waiting for the open region
  plan.order.reserve(count);
  for (uint32_t p = 0; p < count; ++p)
    if (trace.nodes[ids[p]].op == OpKind::Param) plan.order.push_back(p);

  auto flushLoose = [&] {
    if (loose.empty()) return;
    plan.order.insert(plan.order.end(), loose.begin(), loose.end());
    loose.clear();
  };
  auto closeRegion = [&] {
    if (plan.regions.empty() || plan.regions.back().nodes.empty()) return;
    flushLoose();  // they only read values from before the region
    const Region& r = plan.regions.back();
    plan.order.insert(plan.order.end(), r.nodes.begin(), r.nodes.end());
    plan.regions.emplace_back();
  };
  // Scalar constants that several nodes read: the recorder keeps one node
  // per value and trace (x * 0.5 in every step of a loop reads the node the
  // first step recorded), so they run loose, as scalar arguments do, and
  // every region reads them alike; in the region that recorded them, the
  // first step's would differ from the others'. Pow exponents stay in their
  // region, where the kernel specialises on them.
  std::vector<uint8_t> sharedConstant(count, 0);
  {
    std::vector<uint8_t> readers(count, 0), exponent(count, 0);
    for (uint32_t p = 0; p < count; ++p) {
      const trace::Node& n = trace.nodes[ids[p]];
      const auto ins = trace.inputsOf(n);
      for (size_t k = 0; k < ins.size(); ++k) {
        const trace::Node& in = trace.nodes[ins[k]];
        if (in.op != OpKind::Full || in.shape.rank() != 0) continue;
        const uint32_t q = planId[ins[k]];
        readers[q] = static_cast<uint8_t>(std::min(readers[q] + 1, 2));
        exponent[q] |= n.op == OpKind::Pow && k == 1;
      }
    }
    for (uint32_t p = 0; p < count; ++p) sharedConstant[p] = readers[p] == 2 && !exponent[p];
  }
  const std::vector<uint8_t> epilogue = boundaries.matmulEpilogues(trace, ids, planId);
  plan.regions.emplace_back();
  for (uint32_t p = 0; p < count; ++p) {
    const trace::Node& n = trace.nodes[ids[p]];
    if (n.op == OpKind::Param) continue;
    if (sharedConstant[p] || epilogue[p] == RegionBoundaries::kEpilogueLeaf) {
      regionOf[p] = kLoose;
      loose.push_back(p);
      continue;
    }
    const int32_t open = static_cast<int32_t>(plan.regions.size()) - 1;
    auto ins = trace.inputsOf(n);
    if (boundaries.contains(trace, n) || epilogue[p] == RegionBoundaries::kEpilogueOp) {
      // Closes the open region and runs alone, interpreted, after it and
      // the loose nodes before it (it may read either); what follows opens
      // a new region.
      closeRegion();
      flushLoose();
      regionOf[p] = kLoose;
      plan.order.push_back(p);
      continue;
    }
    if (std::binary_search(scalarArgs.begin(), scalarArgs.end(), ids[p])) {
      regionOf[p] = kLoose;
      loose.push_back(p);
      continue;
    }
    if (isView(n.op)) {
      const int32_t src = regionOf[planId[ins[0]]];
      if ((n.op == OpKind::Slice && src != open) || src == kLoose) {
        regionOf[p] = kLoose;
        loose.push_back(p);
        continue;
      }
    }
    bool dependsOnMatmul = false;
    for (uint32_t in : ins) {
      const uint32_t q = planId[in];
      dependsOnMatmul |= regionOf[q] == open && afterMatmul[q];
    }
    Region* r = &plan.regions.back();
    if (n.op == OpKind::Matmul && dependsOnMatmul) {
      // Nodes recorded after the last value this matmul reads from the open
      // region, that read nothing staying in it, belong to the next step
      // (`x_t @ U` recorded before `h @ W`): they move to the new region, so
      // every step of a loop gets the same region whatever the order its
      // operands were recorded in.
      uint32_t lastRead = 0;
      for (uint32_t in : ins)
        if (regionOf[planId[in]] == open) lastRead = std::max(lastRead, planId[in]);
      std::vector<uint32_t>& nodes = r->nodes;
      const size_t first = static_cast<size_t>(std::upper_bound(nodes.begin(), nodes.end(), lastRead) - nodes.begin());
      for (size_t k = first; k < nodes.size(); ++k) {
        bool moves = true;
        for (uint32_t in : trace.inputsOf(trace.nodes[ids[nodes[k]]])) {
          const uint32_t q = planId[in];
          moves &= regionOf[q] != open || moving[q];
        }
        moving[nodes[k]] = moves;
      }
      for (size_t k = nodes.size(); k-- > first;) {  // what stays keeps its inputs
        if (moving[nodes[k]]) continue;
        for (uint32_t in : trace.inputsOf(trace.nodes[ids[nodes[k]]])) moving[planId[in]] = 0;
      }
      std::vector<uint32_t> moved;
      for (size_t k = first; k < nodes.size(); ++k)
        if (moving[nodes[k]]) moved.push_back(nodes[k]);
      std::erase_if(nodes, [&](uint32_t q) { return moving[q] != 0; });
      closeRegion();
      r = &plan.regions.back();
      const int32_t next = static_cast<int32_t>(plan.regions.size()) - 1;
      for (uint32_t q : moved) {
        moving[q] = 0;
        regionOf[q] = next;
        bool after = trace.nodes[ids[q]].op == OpKind::Matmul;
        for (uint32_t in : trace.inputsOf(trace.nodes[ids[q]])) after |= regionOf[planId[in]] == next && afterMatmul[planId[in]];
        afterMatmul[q] = after;
        r->nodes.push_back(q);
      }
      dependsOnMatmul = false;
    } else if (r->nodes.size() >= kMaxRegionNodes) {
      closeRegion();
      r = &plan.regions.back();
      dependsOnMatmul = false;
    }
    regionOf[p] = static_cast<int32_t>(plan.regions.size()) - 1;
    afterMatmul[p] = n.op == OpKind::Matmul || dependsOnMatmul;
    r->nodes.push_back(p);
  }
  closeRegion();
  flushLoose();
  plan.regions.pop_back();  // the empty region left open

  // Inputs and outputs of each region.
  std::vector<uint8_t> isOutput(count, 0);
  std::vector<int32_t> seenBy(count, kNone);  ///< region that listed it as an input
  std::vector<uint32_t> local(count, 0);
  for (uint32_t p = 0; p < count; ++p) {
    if (trace.holders[ids[p]]) isOutput[p] = 1;
    for (uint32_t in : trace.inputsOf(trace.nodes[ids[p]])) {
      const uint32_t q = planId[in];
      if (regionOf[q] >= 0 && regionOf[q] != regionOf[p]) isOutput[q] = 1;
    }
  }
  for (size_t ri = 0; ri < plan.regions.size(); ++ri) {
    Region& r = plan.regions[ri];
    const int32_t self = static_cast<int32_t>(ri);
    for (uint32_t p : r.nodes) {
      const trace::Node& n = trace.nodes[ids[p]];
      r.keyed |= !isLeaf(n.op);
      for (uint32_t in : trace.inputsOf(n)) {
        const uint32_t q = planId[in];
        if (regionOf[q] == self || seenBy[q] == self) continue;
        seenBy[q] = self;
        r.inputs.push_back(q);
      }
      if (isOutput[p]) r.outputs.push_back(p);
    }
    r.ops = static_cast<uint32_t>(r.nodes.size());
    if (r.keyed) {
      trace::Trace sub = buildRegionTrace(trace, ids, planId, local, r);
      r.key = cache::encodeTraceKey(sub, std::vector<uint8_t>(sub.nodes.size(), 1));
      ++plan.keyedRegions;
    }
  }

  // Steps, and each value's last reader in execution order.
  for (uint32_t i = 0; i < plan.order.size();) {
    const int32_t region = regionOf[plan.order[i]] >= 0 ? regionOf[plan.order[i]] : -1;
    uint32_t end = i + 1;
    while (end < plan.order.size() && (regionOf[plan.order[end]] >= 0 ? regionOf[plan.order[end]] : -1) == region)
      ++end;
    plan.steps.push_back({region, i, end});
    i = end;
  }
  plan.lastUse.assign(count, 0);
  for (uint32_t i = 0; i < plan.order.size(); ++i) {
    const uint32_t p = plan.order[i];
    plan.lastUse[p] = std::max(plan.lastUse[p], i);
    for (uint32_t in : trace.inputsOf(trace.nodes[ids[p]]))
      plan.lastUse[planId[in]] = std::max(plan.lastUse[planId[in]], i);
  }
  return plan;
}

trace::Trace regionTrace(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region) {
  std::vector<uint32_t> planId(trace.nodes.size(), 0);
  for (uint32_t p = 0; p < ids.size(); ++p) planId[ids[p]] = p;
  std::vector<uint32_t> local(ids.size(), 0);
  return buildRegionTrace(trace, ids, planId, local, region);
}

}  // namespace kiln::exec
