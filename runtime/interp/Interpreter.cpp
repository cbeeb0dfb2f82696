#include "runtime/interp/Interpreter.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "runtime/core/Half.h"
#include "runtime/backends/Hal.h"
#include "runtime/dist/Collectives.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::interp {

namespace {

using core::OpCategory;
using core::View;
using trace::Node;

bool isHalf(DType t) { return t == DType::f16 || t == DType::bf16; }

/// The operands of a matmul's fused epilogue (MatmulEpilogue), as node
/// ids: the scale constant, the bias and the residual, -1 where the part is
/// absent.
struct EpilogueOperands {
  int64_t scale = -1, bias = -1, residual = -1;
  bool relu = false;
};

/// Executes one node on the trace's device, through the device's op
/// library. f16/bf16 operands of compute ops are widened to f32 first and the
/// result rounded back: "stored natively, computed in f32".
class NodeRunner {
 public:
  NodeRunner(const trace::Trace& trace, NodeResults& results)
      : trace_(trace),
        results_(results),
        values_(results.values),
        device_(hal::deviceContext(trace.device)),
        ops_(device_.ops()),
        allocator_(device_.allocator()) {}

  View run(const Node& n) {
    temps_.clear();
    const auto ins = trace_.inputsOf(n);
    switch (core::opCategory(n.op)) {
      case OpCategory::Leaf: return leaf(n);
      case OpCategory::Shape: return shapeOp(n, ins);
      case OpCategory::Index: return indexOp(n, ins);
      case OpCategory::Scan: return scanOp(n, ins);
      case OpCategory::Collective: return collective(n, ins);
      case OpCategory::Cast: {
        View out = alloc(n.dtype, n.shape);
        ops_.cast(input(ins[0]), n.dtype, out.bytes(n.dtype));
        return out;
      }
      default: return compute(n, ins);
    }
  }

  /// Node `add`, an Add or Sub that reads the Mul node `mulId` once, in one
  /// pass with the product (OpLibrary::productThenAdd); none where the
  /// device's library does not fuse the pair.
  std::optional<View> productThenAdd(const Node& add, uint32_t mulId) {
    temps_.clear();
    if (!ops_.hasProductThenAdd(add.dtype)) return std::nullopt;
    const auto mul = trace_.inputsOf(trace_.nodes[mulId]);
    const auto ins = trace_.inputsOf(add);
    const bool productFirst = ins[0] == mulId;
    View out = alloc(add.dtype, add.shape);
    if (!ops_.productThenAdd(add.op, broadcastArg(input(mul[0]), add.shape), broadcastArg(input(mul[1]), add.shape),
                             broadcastArg(input(productFirst ? ins[1] : ins[0]), add.shape), productFirst, add.shape,
                             out.bytes(add.dtype)))
      return std::nullopt;
    return out;
  }

  /// The Matmul node `mm` with the epilogue whose operands `f` names, in
  /// the library's tile store (OpLibrary::matmulWithEpilogue); none where
  /// the library declines these operands.
  std::optional<View> matmulWithEpilogue(const Node& mm, const EpilogueOperands& f) {
    temps_.clear();
    const auto [a, b] = matmulOperands(mm);
    MatmulEpilogue e;
    if (f.scale >= 0) {
      // A constant (Full) of the product's type: the value its fill writes.
      e.scaled = true;
      e.scale = static_cast<float>(trace_.nodes[static_cast<uint32_t>(f.scale)].f0);
      if (mm.dtype == DType::bf16) e.scale = core::bf16ToFloat(core::floatToBf16(e.scale));
    }
    if (f.bias >= 0) {
      const Arg v = input(static_cast<uint32_t>(f.bias));
      e.bias = v.data;
      e.biasStride = v.strides[v.shape.rank() - 1];
    }
    if (f.residual >= 0) e.residual = input(static_cast<uint32_t>(f.residual));
    e.relu = f.relu;
    View out = alloc(mm.dtype, mm.shape);
    if (!ops_.matmulWithEpilogue(broadcastArg(a, matmulOperandShape(mm.shape, a, true)),
                                 broadcastArg(b, matmulOperandShape(mm.shape, b, false)), e, mm.shape,
                                 out.bytes(mm.dtype)))
      return std::nullopt;
    return out;
  }

  /// Does the device's library fuse a matmul epilogue into results of type
  /// `t` (with a relu when `relu`)?
  bool fusesMatmulEpilogue(DType t, bool relu) const { return ops_.fusesMatmulEpilogue(t, relu); }
  /// ... and a scale and residual (MatmulEpilogue)?
  bool fusesMatmulScaleAndResidual(DType t) const { return ops_.fusesMatmulScaleAndResidual(t); }
  /// Does the library's f32 matmul take f16 and bf16 operands, widening
  /// them as it packs them (OpLibrary::matmulWidensHalf)?
  bool matmulWidensHalf() const { return ops_.matmulWidensHalf(); }

  /// The Cast node `castId` (f16 or bf16 to f32, at schedule position `at`)
  /// is not run: the Matmul that reads it next and last takes the cast's
  /// source as it is (matmulOperands), until takeDeferredCasts.
  void deferCast(uint32_t castId, size_t at) { deferredCasts_.emplace_back(castId, at); }
  /// The casts deferred since the last call, with their positions.
  std::vector<std::pair<uint32_t, size_t>> takeDeferredCasts() { return std::exchange(deferredCasts_, {}); }

 private:
  Arg input(uint32_t id) const {
    const Node& in = trace_.nodes[id];
    return argOf(values_[id], in.dtype, in.shape);
  }

  /// A fresh dense buffer on the trace's device.
  View alloc(DType t, const Shape& shape) { return allocDense(allocator_, t, shape); }

  /// The shape matmul operand `x` is broadcast to for output `out`: out's
  /// batch dims, then [M, K] for the left operand or [K, N] for the right.
  static Shape matmulOperandShape(const Shape& out, const Arg& x, bool left) {
    const int r = out.rank();
    Shape s = out;
    if (left) s[r - 1] = x.shape[x.shape.rank() - 1];
    else s[r - 2] = x.shape[x.shape.rank() - 2];
    return s;
  }

  /// Matmul operand `id`: the source of a cast deferred into the matmul
  /// (deferCast), else the input itself.
  Arg matmulInput(uint32_t id) const {
    for (const auto& [castId, at] : deferredCasts_)
      if (castId == id) return input(trace_.inputsOf(trace_.nodes[id])[0]);
    return input(id);
  }

  /// The operands of Matmul node `mm` as the library takes them: two bf16
  /// operands as they are where it has bf16 units; f16 and bf16 operands
  /// (deferred casts' sources among them) as they are where it widens them
  /// itself; otherwise widened to f32 here.
  std::pair<Arg, Arg> matmulOperands(const Node& mm) {
    const auto ins = trace_.inputsOf(mm);
    if (trace_.nodes[ins[0]].dtype == DType::bf16 && trace_.nodes[ins[1]].dtype == DType::bf16 &&
        ops_.matmulTakesBf16())
      return {input(ins[0]), input(ins[1])};
    if (!ops_.matmulWidensHalf()) return {widened(ins[0]), widened(ins[1])};
    Arg a = matmulInput(ins[0]), b = matmulInput(ins[1]);
    // Two bf16 sources of an f32 product would go to the bf16 GEMM, whose
    // sums are not the f32 GEMM's: one is widened here instead.
    if (a.dtype == DType::bf16 && b.dtype == DType::bf16 && ops_.matmulTakesBf16()) b = widened(b);
    return {a, b};
  }

  /// The input as f32 when it is half precision (kept alive in temps_).
  Arg widened(uint32_t id) { return widened(input(id)); }
  Arg widened(Arg a) {
    if (!isHalf(a.dtype)) return a;
    View w = alloc(DType::f32, a.shape);
    ops_.cast(a, DType::f32, w.bytes(DType::f32));
    temps_.push_back(w.storage);
    return argOf(w, DType::f32, a.shape);
  }

  View compute(const Node& n, std::span<const uint32_t> ins) {
    const bool halfOut = isHalf(n.dtype);
    if (halfOut && core::opCategory(n.op) == OpCategory::Matmul && ops_.hasMatmulHalf(n.dtype) &&
        trace_.nodes[ins[0]].dtype == n.dtype && trace_.nodes[ins[1]].dtype == n.dtype) {
      // Half operands the library multiplies as they are (ops_.matmulHalf).
      View out = alloc(n.dtype, n.shape);
      Arg a = input(ins[0]), b = input(ins[1]);
      if (ops_.matmulHalf(broadcastArg(a, matmulOperandShape(n.shape, a, true)),
                          broadcastArg(b, matmulOperandShape(n.shape, b, false)), n.shape, out.bytes(n.dtype)))
        return out;
    }
    const bool arithmetic = n.op == core::OpKind::Add || n.op == core::OpKind::Sub || n.op == core::OpKind::Mul ||
                            n.op == core::OpKind::Div;
    if (halfOut && arithmetic && ops_.hasHalfElementwise(n.dtype) && trace_.nodes[ins[0]].dtype == n.dtype &&
        trace_.nodes[ins[1]].dtype == n.dtype) {
      // Half operands the library computes with as they are (ops_.binaryHalf).
      View out = alloc(n.dtype, n.shape);
      if (ops_.binaryHalf(n.op, broadcastArg(input(ins[0]), n.shape), broadcastArg(input(ins[1]), n.shape), n.shape,
                          out.bytes(n.dtype)))
        return out;
    }
    if (halfOut && core::opCategory(n.op) == OpCategory::Select && ops_.hasHalfElementwise(n.dtype) &&
        trace_.nodes[ins[1]].dtype == n.dtype && trace_.nodes[ins[2]].dtype == n.dtype) {
      // A select moves half values as they are: nothing to widen or round.
      View out = alloc(n.dtype, n.shape);
      ops_.where(broadcastArg(input(ins[0]), n.shape), broadcastArg(input(ins[1]), n.shape),
                 broadcastArg(input(ins[2]), n.shape), n.shape, out.bytes(n.dtype));
      return out;
    }
    if (halfOut && core::opCategory(n.op) == OpCategory::Unary && ops_.hasHalfElementwise(n.dtype) &&
        trace_.nodes[ins[0]].dtype == n.dtype) {
      // A half operand the library computes with as it is (ops_.unaryHalf).
      View out = alloc(n.dtype, n.shape);
      if (ops_.unaryHalf(n.op, input(ins[0]), out.bytes(n.dtype))) return out;
    }
    const DType workType = halfOut ? DType::f32 : n.dtype;
    View out = alloc(workType, n.shape);
    char* o = out.bytes(workType);
    switch (core::opCategory(n.op)) {
      case OpCategory::Unary: ops_.unary(n.op, widened(ins[0]), o); break;
      case OpCategory::Binary:
        ops_.binary(n.op, broadcastArg(widened(ins[0]), n.shape), broadcastArg(widened(ins[1]), n.shape), n.shape, o);
        break;
      case OpCategory::Compare:
        ops_.compare(n.op, broadcastArg(widened(ins[0]), n.shape), broadcastArg(widened(ins[1]), n.shape), n.shape, o);
        break;
      case OpCategory::Select:
        ops_.where(broadcastArg(input(ins[0]), n.shape), broadcastArg(widened(ins[1]), n.shape),
                    broadcastArg(widened(ins[2]), n.shape), n.shape, o);
        break;
      case OpCategory::Reduce: {
        core::AxisMask mask = 0;
        for (int64_t a : trace_.attrsOf(n)) mask |= 1u << a;
        ops_.reduce(n.op, widened(ins[0]), mask, o);
        break;
      }
      case OpCategory::ArgReduce: {
        auto attrs = trace_.attrsOf(n);
        ops_.argReduce(n.op, widened(ins[0]), static_cast<int>(n.i0), !attrs.empty() && attrs[0] != 0, o);
        break;
      }
      case OpCategory::Matmul: {
        const auto [a, b] = matmulOperands(n);
        ops_.matmul(broadcastArg(a, matmulOperandShape(n.shape, a, true)),
                    broadcastArg(b, matmulOperandShape(n.shape, b, false)), n.shape, o);
        break;
      }
      case OpCategory::Conv:
        ops_.conv2d(widened(ins[0]), widened(ins[1]), core::Conv2dParams::fromAttrs(trace_.attrsOf(n)), n.shape, o);
        break;
      default: throw Error("interpreter: unexpected op " + std::string(core::opName(n.op)));
    }
    if (!halfOut) return out;
    View h = alloc(n.dtype, n.shape);
    ops_.cast(argOf(out, DType::f32, n.shape), n.dtype, h.bytes(n.dtype));
    return h;
  }

  View leaf(const Node& n) {
    if (n.op == core::OpKind::Param) return trace_.params[n.i0].view;
    if (n.op == core::OpKind::Full) {
      // A constant is one element broadcast by stride 0: no memory traffic.
      // Constants share small blocks (one allocation per kConstantsPerBlock
      // of them, not one each: a scalar operand is in most steps' ops).
      if (!constants_ || constantsUsed_ == kConstantsPerBlock) {
        constants_ = core::Storage::allocate(allocator_, kConstantsPerBlock * kConstantSlot);
        constantsUsed_ = 0;
      }
      View v;
      v.storage = constants_;
      v.offset = static_cast<int64_t>(constantsUsed_++ * kConstantSlot / dtype_size(n.dtype));
      ops_.full(n.dtype, 1, n.f0, n.i0, v.bytes(n.dtype));
      return v;
    }
    View out = alloc(n.dtype, n.shape);
    char* o = out.bytes(n.dtype);
    if (n.op == core::OpKind::Arange) ops_.arange(n.dtype, n.shape.numel(), n.f0, n.f1, o);
    else ops_.random(n.op, n.dtype, n.shape.numel(), static_cast<uint64_t>(n.i0), o);
    return out;
  }

  View shapeOp(const Node& n, std::span<const uint32_t> ins) {
    const Node& in = trace_.nodes[ins[0]];
    const View& src = values_[ins[0]];
    switch (n.op) {
      case core::OpKind::Reshape: {
        if (core::isContiguous(in.shape, src.strides)) {
          View v = src;
          core::contiguousStrides(n.shape, v.strides);
          return v;
        }
        View out = alloc(n.dtype, n.shape);
        ops_.copy(input(ins[0]), out.bytes(n.dtype));
        return out;
      }
      case core::OpKind::Permute: {
        View v = src;
        auto perm = trace_.attrsOf(n);
        for (size_t d = 0; d < perm.size(); ++d) v.strides[d] = src.strides[perm[d]];
        return v;
      }
      case core::OpKind::BroadcastTo: {
        View v = src;
        const int off = n.shape.rank() - in.shape.rank();
        for (int d = 0; d < n.shape.rank(); ++d) {
          int s = d - off;
          v.strides[d] = (s < 0 || in.shape[s] == 1) ? 0 : src.strides[s];
        }
        return v;
      }
      case core::OpKind::Slice: {
        View v = src;
        auto a = trace_.attrsOf(n);  // starts..., steps...
        const int r = n.shape.rank();
        for (int d = 0; d < r; ++d) {
          v.offset += a[d] * src.strides[d];
          v.strides[d] = src.strides[d] * a[r + d];
        }
        return v;
      }
      case core::OpKind::Concat: {
        View out = alloc(n.dtype, n.shape);
        const int axis = static_cast<int>(n.i0);
        int64_t offset = 0;
        for (uint32_t id : ins) {
          Arg part = input(id);
          char* dst = out.bytes(n.dtype) + offset * out.strides[axis] * static_cast<int64_t>(dtype_size(n.dtype));
          ops_.copyInto(part, dst, out.strides);
          offset += part.shape[axis];
        }
        return out;
      }
      default: throw Error("interpreter: unexpected shape op " + std::string(core::opName(n.op)));
    }
  }

  View indexOp(const Node& n, std::span<const uint32_t> ins) {
    const int axis = static_cast<int>(n.i0);
    const Arg x = input(ins[0]), index = input(ins[1]);
    if (n.op == core::OpKind::IndexAdd || n.op == core::OpKind::ScatterAdd) {
      // The values on the host, checked: every library plans with them.
      std::vector<int64_t> values = readIndicesOnce(trace_, ins[1], results_);
      checkIndexRange(core::opName(n.op).data(), values.data(), static_cast<int64_t>(values.size()), axis,
                      x.shape[axis]);
      View out = alloc(n.dtype, n.shape);
      if (n.op == core::OpKind::IndexAdd) {
        ops_.indexAdd(x, axis, std::move(values), input(ins[2]), out.bytes(n.dtype));
        return out;
      }
      // scatter_add is index_add into x flattened: each source element at
      // the flat offset of the position its index names (in index order).
      toFlatOffsets(values, index.shape, x.shape, axis);
      View denseX, denseSource;
      const Arg flatX = flatDense(x, &denseX), flatSource = flatDense(input(ins[2]), &denseSource);
      ops_.indexAdd(flatX, 0, std::move(values), flatSource, out.bytes(n.dtype));
      return out;
    }
    // The host cannot read this device's indices: bring them over first, so
    // that a bad one fails this node (as on the CPU), not the device stream.
    if (!device_.hostAccessible())
      checkIndexRange(core::opName(n.op).data(), readIndicesOnce(trace_, ins[1], results_).data(),
                      index.shape.numel(), axis, x.shape[axis]);
    View out = alloc(n.dtype, n.shape);
    if (n.op == core::OpKind::IndexSelect) ops_.indexSelect(x, axis, index, n.shape, out.bytes(n.dtype));
    else ops_.gather(x, axis, index, out.bytes(n.dtype));
    return out;
  }

  /// cumsum as index_add of the result onto itself, one position along the
  /// axis later: out = x, then out[.., i, ..] += out[.., i - 1, ..] for i in
  /// order (each addition rounded in the dtype, as index_add's), so every
  /// library (a GPU's tier 0 too) runs it with its index_add.
  View scanOp(const Node& n, std::span<const uint32_t> ins) {
    const int axis = static_cast<int>(n.i0);
    View out = alloc(n.dtype, n.shape);
    char* bytes = out.bytes(n.dtype);
    RunningSumRows rows = runningSumRows(bytes, n.dtype, n.shape, out.strides, axis);
    ops_.indexAdd(input(ins[0]), axis, std::move(rows.next), rows.previous, bytes);
    return out;
  }

  /// scatter_add's index values (row-major over `indexShape`) become offsets
  /// into a dense tensor of `shape`: the value along `axis`, the element's
  /// own place along the others.
  static void toFlatOffsets(std::vector<int64_t>& values, const Shape& indexShape, const Shape& shape, int axis) {
    const int rank = shape.rank();
    int64_t strides[Shape::kMaxRank], at[Shape::kMaxRank] = {};
    core::contiguousStrides(shape, strides);
    int64_t base = 0;  // the offset of `at` with 0 along the axis
    for (int64_t& v : values) {
      v = base + v * strides[axis];
      for (int d = rank - 1; d >= 0; --d) {  // the next position of index, row-major
        if (d != axis) base += strides[d];
        if (++at[d] < indexShape[d]) break;
        if (d != axis) base -= at[d] * strides[d];
        at[d] = 0;
      }
    }
  }

  /// `a` as a 1-D dense argument: itself when dense, else copied into `keep`.
  Arg flatDense(const Arg& a, View* keep) {
    Arg flat = a;
    if (!core::isContiguous(a.shape, a.strides)) {
      *keep = alloc(a.dtype, a.shape);
      ops_.copy(a, keep->bytes(a.dtype));
      flat = argOf(*keep, a.dtype, a.shape);
    }
    flat.shape = Shape{a.shape.numel()};
    flat.strides[0] = 1;
    return flat;
  }

  /// A collective on dense buffers: on host memory through the world
  /// communicator (the device's queued work is waited for first), on a CUDA
  /// device through its NCCL communicator, on a communication stream that
  /// waits for the work queued before it (runtime/dist/DeviceCollectives.cpp).
  /// Either is started without waiting; its value is ready once
  /// takeStarted()'s future is.
  View collective(const Node& n, std::span<const uint32_t> ins) {
    const bool onCuda = trace_.device.kind == Device::CUDA;
    if (!device_.hostAccessible() && !onCuda)
      throw Error("dist::" + std::string(core::opName(n.op)) + ": tensors on " + trace_.device.str() +
                  " cannot take part in a collective (MPI takes host memory, NCCL CUDA devices); move them to "
                  "the CPU first");
    const Node& in = trace_.nodes[ins[0]];
    Arg x = input(ins[0]);
    if (!core::isContiguous(in.shape, x.strides)) {
      View dense = alloc(in.dtype, in.shape);
      ops_.copy(x, dense.bytes(in.dtype));
      temps_.push_back(dense.storage);
      x = argOf(dense, in.dtype, in.shape);
    }
    View out = alloc(n.dtype, n.shape);
    if (onCuda && dist::size() == 1) {
      // One rank: each collective is the identity, and needs no NCCL (a
      // script runs unchanged without a launcher).
      ops_.copy(x, out.bytes(n.dtype));
      return out;
    }
    // Either runs off this thread's order (the communication thread, or a
    // communication stream): its buffers live until it is done.
    std::vector<std::shared_ptr<void>> keep = {values_[ins[0]].storage, out.storage};
    if (!temps_.empty()) keep.push_back(temps_.back());
    if (onCuda) {
      started_ = dist::detail::startDeviceCollective(n.op, n.i0, n.dtype, in.shape, n.shape, x.data,
                                                     out.bytes(n.dtype), trace_.device.index, device_.defaultStream(),
                                                     std::move(keep));
      return out;
    }
    device_.synchronize();
    started_ = dist::detail::startCollective(n.op, n.i0, n.dtype, in.shape, n.shape, x.data, out.bytes(n.dtype),
                                             std::move(keep));
    return out;
  }

 public:
  /// The collective the last run() started, if any (the caller waits for it
  /// where its value is read).
  std::shared_future<void> takeStarted() { return std::move(started_); }

 private:
  std::shared_future<void> started_;

  const trace::Trace& trace_;
  NodeResults& results_;
  const std::vector<View>& values_;
  hal::DeviceContext& device_;
  OpLibrary& ops_;
  hal::Allocator& allocator_;
  std::vector<std::shared_ptr<core::Storage>> temps_;
  /// Casts whose matmul takes their source (deferCast): id and position.
  std::vector<std::pair<uint32_t, size_t>> deferredCasts_;
  /// The block that constants are placed in, one kConstantSlot each (every
  /// dtype's size divides it, so a slot's offset is whole in its elements).
  static constexpr std::size_t kConstantSlot = 16, kConstantsPerBlock = 16;
  std::shared_ptr<core::Storage> constants_;
  std::size_t constantsUsed_ = 0;
};

}  // namespace

namespace {
const std::shared_future<void>* pendingOf(const NodeResults& results, uint32_t id) {
  for (const auto& [node, done] : results.pending)
    if (node == id) return &done;
  return nullptr;
}

/// Runs node `i` (at schedule position `at`): a failed input fails it with the
/// same message; inputs whose last reader it is are freed unless live.
inline void runOne(NodeRunner& runner, const trace::Trace& trace, size_t i, size_t at,
                   const std::vector<uint32_t>& lastUse, NodeResults& results) {
  const Node& node = trace.nodes[i];
  std::shared_ptr<const std::string> failedInput;
  // A view of a pending value (a collective's dense result) is made without
  // waiting and is pending with it; every other reader waits.
  std::shared_future<void> inherited;
  if (!results.pending.empty()) {
    for (uint32_t in : trace.inputsOf(node)) {
      const std::shared_future<void>* p = pendingOf(results, in);
      if (!p) continue;
      const bool view = node.op == core::OpKind::Slice || node.op == core::OpKind::Permute ||
                        node.op == core::OpKind::BroadcastTo ||
                        (node.op == core::OpKind::Reshape &&
                         core::isContiguous(trace.nodes[in].shape, results.values[in].strides));
      if (view) inherited = *p;
      else awaitValue(results, in);
    }
  }
  for (uint32_t in : trace.inputsOf(node))
    if (results.errors[in]) failedInput = results.errors[in];
  if (failedInput) {
    results.errors[i] = failedInput;
  } else {
    try {
      results.values[i] = runner.run(node);
      if (std::shared_future<void> started = runner.takeStarted(); started.valid())
        results.pending.emplace_back(static_cast<uint32_t>(i), std::move(started));
      else if (inherited.valid())
        results.pending.emplace_back(static_cast<uint32_t>(i), std::move(inherited));
    } catch (const std::exception& e) {
      results.errors[i] = std::make_shared<const std::string>(e.what());
    }
  }
  // Free inputs whose last reader was this node, unless a tensor holds them.
  for (uint32_t in : trace.inputsOf(node)) {
    if (lastUse[in] == at && !trace.holders[in]) results.values[in] = View{};
  }
}

/// Runs the Mul node `i` (at position `at`) and node `j` (at `jAt`), the
/// next one run, as one pass when j
/// is an Add or Sub that reads i once and last, no tensor holds i, and both
/// are of one type (the library says which it fuses) and shape: a * b + c
/// (an optimiser's update, a scaled residual) then reads three operands and
/// writes one, where two ops read four, write two and allocate the product. The results are the two ops'
/// (the product rounded first); i gets no value, as nothing reads it. False
/// when the pair does not qualify or the library does not fuse it: then
/// nothing ran.
bool runProductThenAdd(NodeRunner& runner, const trace::Trace& trace, uint32_t i, size_t at, uint32_t j, size_t jAt,
                       const std::vector<uint32_t>& lastUse, NodeResults& results) {
  const Node& mul = trace.nodes[i];
  const Node& add = trace.nodes[j];
  if (mul.op != core::OpKind::Mul || (add.op != core::OpKind::Add && add.op != core::OpKind::Sub) ||
      trace.holders[i] || lastUse[i] != jAt || !results.pending.empty() || mul.dtype != add.dtype ||
      !(mul.shape == add.shape))
    return false;
  const auto ins = trace.inputsOf(add);
  if ((ins[0] == i) == (ins[1] == i)) return false;  // reads the product once
  const uint32_t other = ins[0] == i ? ins[1] : ins[0];
  for (uint32_t in : {trace.inputsOf(mul)[0], trace.inputsOf(mul)[1], other})
    if (results.errors[in] || trace.nodes[in].dtype != mul.dtype) return false;
  try {
    std::optional<View> out = runner.productThenAdd(add, i);
    if (!out) return false;
    results.values[j] = std::move(*out);
  } catch (const std::exception& e) {
    results.errors[j] = std::make_shared<const std::string>(e.what());
  }
  for (uint32_t in : trace.inputsOf(mul))
    if (lastUse[in] == at && !trace.holders[in]) results.values[in] = View{};
  if (lastUse[other] == jAt && !trace.holders[other]) results.values[other] = View{};
  return true;
}

std::atomic<uint64_t> gFusedEpilogues{0};
std::atomic<uint64_t> gCastsIntoMatmuls{0};

/// A schedule: nodes run in order, `order[k]` at position `position(k)`
/// (lastUse's unit).
struct Schedule {
  std::span<const uint32_t> order;
  uint32_t first = 0;  ///< position of order[0]; positions are consecutive
  /// Ids are positions (Interpreter::run, over every needed node).
  bool positionsAreIds = false;
  size_t position(size_t k) const { return positionsAreIds ? order[k] : first + k; }
};

/// The schedule index of the next node after `k` that computes (not a
/// leaf); order.size() when none.
size_t nextComputing(const trace::Trace& trace, const Schedule& s, size_t k) {
  size_t next = k + 1;
  while (next < s.order.size() && core::opCategory(trace.nodes[s.order[next]].op) == OpCategory::Leaf) ++next;
  return next;
}

/// The fused epilogue of a matmul: the schedule indices of the ops it
/// takes in (-1 where a part is absent), in the order it applies them, and
/// their operands.
struct EpilogueOps {
  int64_t mul = -1, add = -1, residualAdd = -1, relu = -1;
  EpilogueOperands operands;
  bool empty() const { return mul < 0 && add < 0 && residualAdd < 0 && relu < 0; }
  /// The schedule index of the last op taken in (k's when none).
  size_t last(size_t k) const {
    return static_cast<size_t>(std::max({static_cast<int64_t>(k), mul, add, residualAdd, relu}));
  }
};

/// Is node `id` a constant of one element of type `t`, a scale the GEMM can
/// take?
bool isScalarConstant(const trace::Trace& trace, uint32_t id, DType t) {
  const Node& n = trace.nodes[id];
  return n.op == core::OpKind::Full && n.dtype == t && n.shape.numel() == 1;
}

/// What of the ops after the Matmul at schedule index `k` its library can
/// apply in the product's tile store, in the order the tile store applies
/// them (MatmulEpilogue), each optional: a Mul by a constant of one element
/// (a scale), an Add of a bias along the last axis, an Add of an operand of
/// the product's shape (a residual), a Relu. Each reads the value before it
/// once and last, no tensor holds that value, and all are of the product's
/// type and shape. Only leaves lie between them (nextComputing). Nothing is
/// run here.
EpilogueOps planEpilogue(NodeRunner& runner, const trace::Trace& trace, const Schedule& s, size_t k,
                         const std::vector<uint32_t>& lastUse, const NodeResults& results) {
  EpilogueOps ops;
  const uint32_t mmId = s.order[k];
  const Node& mm = trace.nodes[mmId];
  if (!results.pending.empty() || trace.holders[mmId] || !runner.fusesMatmulEpilogue(mm.dtype, false)) return ops;
  for (uint32_t in : trace.inputsOf(mm))
    if (results.errors[in] || trace.nodes[in].dtype != mm.dtype) return ops;
  const bool scaleAndResidual = runner.fusesMatmulScaleAndResidual(mm.dtype);
  // The op that reads `value` next and last (schedule index; -1 when none)
  // and, for a binary op of the product's shape and type that reads it
  // once, its other operand.
  size_t at = k;
  uint32_t value = mmId;
  auto next = [&]() -> int64_t {
    const size_t n = nextComputing(trace, s, at);
    if (n >= s.order.size() || trace.holders[value] || lastUse[value] != s.position(n)) return -1;
    const Node& op = trace.nodes[s.order[n]];
    return op.dtype == mm.dtype && op.shape == mm.shape ? static_cast<int64_t>(n) : -1;
  };
  auto otherOperand = [&](size_t n) -> int64_t {
    const auto ins = trace.inputsOf(trace.nodes[s.order[n]]);
    if (ins.size() != 2 || (ins[0] == value) == (ins[1] == value)) return -1;
    const uint32_t other = ins[0] == value ? ins[1] : ins[0];
    if (results.errors[other] || trace.nodes[other].dtype != mm.dtype) return -1;
    return other;
  };
  auto take = [&](int64_t n, int64_t& slot) {
    slot = n;
    at = static_cast<size_t>(n);
    value = s.order[at];
  };
  int64_t n = next();
  if (n >= 0 && scaleAndResidual && trace.nodes[s.order[n]].op == core::OpKind::Mul) {
    const int64_t c = otherOperand(static_cast<size_t>(n));
    if (c >= 0 && isScalarConstant(trace, static_cast<uint32_t>(c), mm.dtype)) {
      ops.operands.scale = c;
      take(n, ops.mul);
      n = next();
    }
  }
  if (n >= 0 && trace.nodes[s.order[n]].op == core::OpKind::Add) {
    const int64_t b = otherOperand(static_cast<size_t>(n));
    if (b >= 0 && core::isLastAxisVector(trace.nodes[b].shape, mm.shape)) {
      ops.operands.bias = b;
      take(n, ops.add);
      n = next();
    }
  }
  if (n >= 0 && scaleAndResidual && trace.nodes[s.order[n]].op == core::OpKind::Add) {
    const int64_t r = otherOperand(static_cast<size_t>(n));
    if (r >= 0 && trace.nodes[r].shape == mm.shape) {
      ops.operands.residual = r;
      take(n, ops.residualAdd);
      n = next();
    }
  }
  // (The library is asked about relus only when one follows: cuBLASLt's
  // answer costs a probe.)
  if (n >= 0 && trace.nodes[s.order[n]].op == core::OpKind::Relu && runner.fusesMatmulEpilogue(mm.dtype, true)) {
    ops.operands.relu = true;
    ops.relu = n;
  }
  return ops;
}

/// Runs the Matmul at schedule index `k` with its epilogue (planEpilogue):
/// the leaves between first (a bias parameter or the scale may be one),
/// then one library call, or, where the library declines these operands,
/// each op on its own. Returns the schedule index of the last op it ran, or
/// k when there is no epilogue (nothing ran).
size_t runMatmulEpilogue(NodeRunner& runner, const trace::Trace& trace, const Schedule& s, size_t k,
                         const std::vector<uint32_t>& lastUse, NodeResults& results) {
  const EpilogueOps ops = planEpilogue(runner, trace, s, k, lastUse, results);
  if (ops.empty()) return k;
  const int64_t fused[] = {static_cast<int64_t>(k), ops.mul, ops.add, ops.residualAdd, ops.relu};
  const size_t lastAt = ops.last(k);
  for (size_t q = k + 1; q < lastAt; ++q)
    if (std::find(std::begin(fused), std::end(fused), static_cast<int64_t>(q)) == std::end(fused))
      runOne(runner, trace, s.order[q], s.position(q), lastUse, results);
  const uint32_t last = s.order[lastAt];
  const Node& mm = trace.nodes[s.order[k]];
  // Op by op: where the library declines these operands, and where a leaf
  // that just ran (a bias or residual made between) failed, so that each op
  // reports what the separate ops would.
  auto opByOp = [&] {
    for (int64_t q : fused)
      if (q >= 0) runOne(runner, trace, s.order[q], s.position(static_cast<size_t>(q)), lastUse, results);
    return lastAt;
  };
  for (int64_t operand : {ops.operands.scale, ops.operands.bias, ops.operands.residual})
    if (operand >= 0 && results.errors[static_cast<uint32_t>(operand)]) return opByOp();
  try {
    std::optional<View> out = runner.matmulWithEpilogue(mm, ops.operands);
    if (!out) return opByOp();
    results.values[last] = std::move(*out);
    gFusedEpilogues.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    results.errors[last] = std::make_shared<const std::string>(e.what());
  }
  // The operands whose last reader was a fused op, unless a tensor holds them.
  auto release = [&](int64_t operand, int64_t q) {
    if (operand < 0 || q < 0) return;
    const auto id = static_cast<uint32_t>(operand);
    if (lastUse[id] == s.position(static_cast<size_t>(q)) && !trace.holders[id]) results.values[id] = View{};
  };
  for (uint32_t in : trace.inputsOf(mm)) release(in, static_cast<int64_t>(k));
  release(ops.operands.scale, ops.mul);
  release(ops.operands.bias, ops.add);
  release(ops.operands.residual, ops.residualAdd);
  return lastAt;
}

/// Whether the Cast at schedule index `k` can be left to the Matmul that
/// reads it (NodeRunner::deferCast): an f16 or bf16 value cast to f32 whose
/// only reader is the next node that computes (or the one after a cast
/// that folds into it too), a Matmul of a library that
/// widens half operands as it packs them (the product then has the bits of
/// the cast's f32 values, without them); no tensor holds the cast's value,
/// and its source is ready.
bool castFoldsIntoMatmul(NodeRunner& runner, const trace::Trace& trace, const Schedule& s, size_t k,
                         const std::vector<uint32_t>& lastUse, const NodeResults& results, bool castBetween = true) {
  const uint32_t id = s.order[k];
  const Node& cast = trace.nodes[id];
  if (cast.dtype != DType::f32 || trace.holders[id] || !results.pending.empty() || !runner.matmulWidensHalf())
    return false;
  const uint32_t source = trace.inputsOf(cast)[0];
  if (!isHalf(trace.nodes[source].dtype) || results.errors[source]) return false;
  size_t n = nextComputing(trace, s, k);
  // The other operand's cast may come between (cast(x) @ cast(w)).
  if (castBetween && n < s.order.size() && trace.nodes[s.order[n]].op == core::OpKind::Cast &&
      castFoldsIntoMatmul(runner, trace, s, n, lastUse, results, /*castBetween=*/false))
    n = nextComputing(trace, s, n);
  return n < s.order.size() && trace.nodes[s.order[n]].op == core::OpKind::Matmul && lastUse[id] == s.position(n);
}

/// After the Matmul that took them: frees the sources of the deferred casts
/// whose last reader was the cast, unless a tensor holds them.
void releaseDeferredCasts(NodeRunner& runner, const trace::Trace& trace, const std::vector<uint32_t>& lastUse,
                          NodeResults& results) {
  for (const auto& [castId, at] : runner.takeDeferredCasts()) {
    const uint32_t source = trace.inputsOf(trace.nodes[castId])[0];
    if (lastUse[source] == at && !trace.holders[source]) results.values[source] = View{};
  }
}

/// Runs a schedule: each node through runOne, except a Mul with the Add
/// after it (runProductThenAdd), a Matmul with its epilogue
/// (runMatmulEpilogue), each pair or group in one library call, and a cast
/// of a half operand into a Matmul, which the Matmul's packing does
/// (castFoldsIntoMatmul).
void runSchedule(NodeRunner& runner, const trace::Trace& trace, const Schedule& s,
                 const std::vector<uint32_t>& lastUse, NodeResults& results) {
  for (size_t k = 0; k < s.order.size(); ++k) {
    const uint32_t i = s.order[k];
    const core::OpKind op = trace.nodes[i].op;
    if (op == core::OpKind::Cast && castFoldsIntoMatmul(runner, trace, s, k, lastUse, results)) {
      runner.deferCast(i, s.position(k));
      gCastsIntoMatmuls.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (op == core::OpKind::Matmul) {
      const size_t done = runMatmulEpilogue(runner, trace, s, k, lastUse, results);
      if (done == k) runOne(runner, trace, i, s.position(k), lastUse, results);
      releaseDeferredCasts(runner, trace, lastUse, results);
      k = done;
      continue;
    }
    if (op == core::OpKind::Mul) {
      const size_t next = nextComputing(trace, s, k);
      if (next < s.order.size()) {
        // The leaves between read nothing, so they run first.
        for (size_t q = k + 1; q < next; ++q) runOne(runner, trace, s.order[q], s.position(q), lastUse, results);
        if (runProductThenAdd(runner, trace, i, s.position(k), s.order[next], s.position(next), lastUse, results)) {
          k = next;  // both ran
          continue;
        }
        runOne(runner, trace, i, s.position(k), lastUse, results);
        k = next - 1;  // the leaves ran; `next` runs next
        continue;
      }
    }
    runOne(runner, trace, i, s.position(k), lastUse, results);
  }
}
}  // namespace

void awaitValue(NodeResults& results, uint32_t id) {
  for (size_t k = 0; k < results.pending.size(); ++k) {
    if (results.pending[k].first != id) continue;
    std::shared_future<void> done = std::move(results.pending[k].second);
    results.pending.erase(results.pending.begin() + static_cast<std::ptrdiff_t>(k));
    try {
      done.get();
    } catch (const std::exception& e) {
      results.values[id] = View{};
      results.errors[id] = std::make_shared<const std::string>(e.what());
    }
    return;
  }
}

void awaitAll(NodeResults& results) {
  while (!results.pending.empty()) awaitValue(results, results.pending.front().first);
}

std::vector<int64_t> readIndicesOnce(const trace::Trace& trace, uint32_t id, NodeResults& results) {
  hal::DeviceContext& device = hal::deviceContext(trace.device);
  const Node& node = trace.nodes[id];
  const View& view = results.values[id];
  const Arg index = argOf(view, node.dtype, node.shape);
  if (device.hostAccessible()) return readIndices(device, index);
  // The value the view shows. Its buffer's elements do not change during
  // the run (no op writes into an existing buffer, and compiled kernels
  // that donate inputs run only on host-accessible devices, which do not
  // come here); the root keeps reads of different values apart even so.
  uint32_t root = id;
  for (;;) {
    const core::OpKind op = trace.nodes[root].op;
    if (op != core::OpKind::Reshape && op != core::OpKind::Permute && op != core::OpKind::Slice &&
        op != core::OpKind::BroadcastTo)
      break;
    root = trace.inputsOf(trace.nodes[root])[0];
  }
  // The same elements in the same row-major order: the same view, or dense
  // views of as many elements from the same place (a reshape).
  const int rank = node.shape.rank();
  const bool dense = core::isContiguous(node.shape, view.strides);
  for (const NodeResults::IndexRead& r : results.indexReads) {
    if (r.root != root || r.storage.lock() != view.storage || r.offset != view.offset || r.dtype != node.dtype)
      continue;
    const bool same = r.shape == node.shape && std::equal(view.strides, view.strides + rank, r.strides);
    if (same || (dense && r.shape.numel() == node.shape.numel() && core::isContiguous(r.shape, r.strides)))
      return r.values;
  }
  NodeResults::IndexRead read;
  read.root = root;
  read.storage = view.storage;
  read.offset = view.offset;
  std::copy(view.strides, view.strides + Shape::kMaxRank, read.strides);
  read.dtype = node.dtype;
  read.shape = node.shape;
  read.values = readIndices(device, index);
  results.indexReads.push_back(std::move(read));
  return results.indexReads.back().values;
}

uint64_t fusedMatmulEpilogues() { return gFusedEpilogues.load(std::memory_order_relaxed); }
uint64_t castsIntoMatmuls() { return gCastsIntoMatmuls.load(std::memory_order_relaxed); }

void Interpreter::run(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                      const std::vector<uint32_t>& lastUse, NodeResults& results) const {
  const size_t n = trace.nodes.size();
  results.reset(n);
  NodeRunner runner(trace, results);
  std::vector<uint32_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (needed[i]) order.push_back(static_cast<uint32_t>(i));
  runSchedule(runner, trace, Schedule{order, 0, /*positionsAreIds=*/true}, lastUse, results);
  awaitAll(results);
}

void Interpreter::runNodes(const trace::Trace& trace, std::span<const uint32_t> nodes, uint32_t first,
                           const std::vector<uint32_t>& lastUse, NodeResults& results) const {
  NodeRunner runner(trace, results);
  runSchedule(runner, trace, Schedule{nodes, first, false}, lastUse, results);
}

}  // namespace kiln::interp
