// TraceTemplate: a thread's pending trace captured with where each tensor it
// reads comes from, and run again by installing it as one trace.
#include "kiln/trace_template.h"

#include <string>

#include "kiln/error.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/trace/Recorder.h"

namespace kiln {

namespace detail {

/// Where a parameter of the captured trace, or an output, comes from.
struct Source {
  enum Kind : uint8_t { Node, Input, Constant } kind;
  uint32_t index;  ///< node id, input position or constant position
};

struct TraceTemplateData {
  trace::Trace trace;           ///< the captured nodes; `params` left empty
  std::vector<Source> params;   ///< per parameter of `trace` (Input or Constant)
  std::vector<Source> outputs;  ///< per output
  std::vector<uint32_t> outputNodes;  ///< the Node outputs' ids, in output order
  std::vector<Tensor> constants;
  struct Spec {
    DType dtype;
    Shape shape;
  };
  std::vector<Spec> inputs;
};

}  // namespace detail

namespace {

using detail::Source;

std::string specText(DType t, const Shape& s) { return std::string(dtype_name(t)) + s.str(); }

[[noreturn]] void fail(const std::string& what) { throw Error("TraceTemplate: " + what); }

}  // namespace

TraceTemplate TraceTemplate::capture(std::span<const Tensor> inputs, std::span<const Tensor> constants,
                                     std::span<const Tensor> outputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) fail("capture: input " + std::to_string(i) + " is undefined");
    // A pending input would be computed by the captured ops, not replaced.
    if (inputs[i].impl()->owner.load(std::memory_order_acquire))
      fail("capture: input " + std::to_string(i) + " is not computed yet (it is pending in a trace); inputs must "
           "be materialized tensors the captured ops read");
  }
  for (const Tensor& t : constants)
    if (!t.defined()) fail("capture: a constant tensor is undefined");
  for (const Tensor& t : outputs)
    if (!t.defined()) fail("capture: an output tensor is undefined");
  auto data = std::make_shared<detail::TraceTemplateData>();
  data->constants.assign(constants.begin(), constants.end());
  for (const Tensor& t : inputs) data->inputs.push_back({t.dtype(), t.shape()});
  trace::Recorder& recorder = trace::Recorder::current();
  recorder.inspectPending([&](const trace::Trace& pending) {
    const auto epochLow = static_cast<uint32_t>(pending.epoch);
    // The parameter node a materialized tensor became in this trace, if any.
    auto paramNode = [&](const detail::TensorImpl* impl) -> int64_t {
      uint64_t tag = impl->paramTag.load(std::memory_order_relaxed);
      if (tag == 0 || static_cast<uint32_t>(tag >> 32) != epochLow) return -1;
      return static_cast<uint32_t>(tag);
    };
    // Parameters: each must be an input or a constant (found by identity).
    std::vector<int64_t> sourceOfNode(pending.nodes.size(), -1);
    std::vector<Source> nodeSources;
    auto mark = [&](std::span<const Tensor> tensors, Source::Kind kind) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        int64_t id = paramNode(tensors[i].impl());
        if (id < 0 || id >= static_cast<int64_t>(pending.nodes.size()) ||
            pending.nodes[id].op != core::OpKind::Param || sourceOfNode[id] >= 0)
          continue;
        sourceOfNode[id] = static_cast<int64_t>(nodeSources.size());
        nodeSources.push_back({kind, static_cast<uint32_t>(i)});
      }
    };
    mark(inputs, Source::Input);
    mark(constants, Source::Constant);
    data->params.resize(pending.params.size());
    for (size_t id = 0; id < pending.nodes.size(); ++id) {
      const trace::Node& n = pending.nodes[id];
      if (n.op != core::OpKind::Param) continue;
      if (sourceOfNode[id] < 0)
        fail("capture: the trace reads a " + specText(n.dtype, n.shape) + " tensor (value %" + std::to_string(id) +
             ") that is neither an input nor a constant; pass it in one of the two lists, or flush (kiln::step) "
             "before recording the ops to capture");
      data->params[n.i0] = nodeSources[sourceOfNode[id]];
    }
    // Outputs: a value of this trace, or an input or constant passed through.
    for (const Tensor& t : outputs) {
      const detail::TensorImpl* impl = t.impl();
      if (impl->owner.load(std::memory_order_relaxed) == &recorder) {
        data->outputs.push_back({Source::Node, static_cast<uint32_t>(data->outputNodes.size())});
        data->outputNodes.push_back(impl->value);
        continue;
      }
      bool found = false;
      for (size_t i = 0; i < inputs.size() && !found; ++i)
        if (inputs[i].impl() == impl) {
          data->outputs.push_back({Source::Input, static_cast<uint32_t>(i)});
          found = true;
        }
      for (size_t i = 0; i < constants.size() && !found; ++i)
        if (constants[i].impl() == impl) {
          data->outputs.push_back({Source::Constant, static_cast<uint32_t>(i)});
          found = true;
        }
      if (!found)
        fail("capture: an output (" + specText(impl->dtype, impl->shape) +
             ") is neither pending in this thread's trace nor an input or constant (was the trace flushed while "
             "the ops were recorded?)");
    }
    data->trace.device = pending.device;
    data->trace.nodes = pending.nodes;
    data->trace.operands = pending.operands;
    data->trace.attrs = pending.attrs;
    data->trace.opCount = pending.opCount;
  });
  return TraceTemplate(std::move(data));
}

std::vector<Tensor> TraceTemplate::run(std::span<const Tensor> inputs) const {
  const detail::TraceTemplateData& d = *data_;
  if (inputs.size() != d.inputs.size())
    fail("run: the template takes " + std::to_string(d.inputs.size()) + " input(s), got " +
         std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) fail("run: input " + std::to_string(i) + " is undefined");
    if (t.dtype() != d.inputs[i].dtype || t.shape() != d.inputs[i].shape)
      fail("run: input " + std::to_string(i) + " is " + specText(t.dtype(), t.shape()) +
           " but the template was captured with " + specText(d.inputs[i].dtype, d.inputs[i].shape) +
           "; capture a template for these inputs");
    if (t.device() != d.trace.device && !d.trace.empty())
      fail("run: input " + std::to_string(i) + " is on " + t.device().str() + " but the template runs on " +
           d.trace.device.str() + "; move it with to()");
  }
  // Inputs still pending somewhere are computed first (their views are read).
  for (const Tensor& t : inputs) trace::Recorder::materialize(t.impl());
  std::vector<core::View> params;
  params.reserve(d.params.size());
  for (const Source& s : d.params)
    params.push_back((s.kind == Source::Input ? inputs[s.index] : d.constants[s.index]).impl()->view);
  std::vector<Tensor> computed;
  if (!d.trace.empty()) computed = trace::Recorder::current().runCaptured(d.trace, params, d.outputNodes);
  std::vector<Tensor> outputs;
  outputs.reserve(d.outputs.size());
  for (const Source& s : d.outputs)
    outputs.push_back(s.kind == Source::Node    ? computed[s.index]
                      : s.kind == Source::Input ? inputs[s.index]
                                                : d.constants[s.index]);
  return outputs;
}

size_t TraceTemplate::num_ops() const { return static_cast<size_t>(data_->trace.opCount); }
size_t TraceTemplate::num_inputs() const { return data_->inputs.size(); }
size_t TraceTemplate::num_outputs() const { return data_->outputs.size(); }

}  // namespace kiln
