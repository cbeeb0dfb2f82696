// C ABI: explicit capture of op sequences into kiln_function, and calls that
// replay them through the public ops (so they are traced, keyed, cached and
// compiled like any other code).
#include <dlpack/dlpack.h>

#include <memory>
#include <unordered_map>

#include "kiln/ops.h"
#include "kiln/runtime.h"
#include "runtime/capi/CApiSupport.h"
#include "runtime/capi/DLPackInterop.h"
#include "runtime/capi/OpCall.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/core/TensorSize.h"
#include "runtime/support/Log.h"

namespace kiln::capi {

/// Where a captured op input comes from.
struct Ref {
  enum Kind : uint8_t { None, Input, Op, Constant, Number } kind = None;
  uint32_t index = 0;
  Value number;  ///< Number: kind, f, i (no tensor)
};

struct CapturedOp {
  kiln_op op;
  std::vector<Ref> inputs;
  std::vector<Attr> attrs;
};

struct TensorSpec {
  DType dtype;
  Shape shape;
};

/// An immutable captured computation; shared by all handles and threads.
struct Function {
  std::vector<TensorSpec> inputs, outputs;
  std::vector<CapturedOp> ops;
  std::vector<Tensor> constants;
  std::vector<Ref> results;
};

namespace {

struct CaptureState {
  Function fn;
  std::unordered_map<const detail::TensorImpl*, Ref> known;
  /// Every tensor in `known` stays alive until the capture ends, so that an
  /// address cannot be reused by an unrelated tensor meanwhile.
  std::vector<Tensor> keepAlive;
};

thread_local std::unique_ptr<CaptureState> tCapture;

Ref refOf(CaptureState& c, const Tensor& t) {
  auto it = c.known.find(t.impl());
  if (it != c.known.end()) return it->second;
  // Neither an input nor computed by a captured op: a constant of the function.
  Ref r{Ref::Constant, static_cast<uint32_t>(c.fn.constants.size()), {}};
  c.fn.constants.push_back(t);
  c.known.emplace(t.impl(), r);
  return r;
}

std::string specText(DType t, const Shape& s) { return std::string(dtype_name(t)) + " " + s.str(); }

void checkSignature(const Function& fn, const std::vector<TensorSpec>& given) {
  if (given.size() != fn.inputs.size())
    fail(KILN_ERROR_INVALID_ARGUMENT, "the function takes " + std::to_string(fn.inputs.size()) + " input(s), got " +
                                          std::to_string(given.size()));
  for (size_t i = 0; i < given.size(); ++i) {
    const TensorSpec& want = fn.inputs[i];
    if (given[i].dtype != want.dtype)
      fail(KILN_ERROR_DTYPE, "input " + std::to_string(i) + " is " + specText(given[i].dtype, given[i].shape) +
                                 " but the function was captured with " + specText(want.dtype, want.shape) +
                                 "; cast it, or capture again for this dtype");
    if (given[i].shape != want.shape)
      fail(KILN_ERROR_SHAPE, "input " + std::to_string(i) + " is " + specText(given[i].dtype, given[i].shape) +
                                 " but the function was captured with " + specText(want.dtype, want.shape) +
                                 "; capture again for this shape");
  }
}

std::vector<Tensor> run(const Function& fn, const std::vector<Tensor>& inputs) {
  // One call = one trace: earlier pending work is flushed first, and the
  // intermediates are dropped before the final flush so that only the
  // outputs are live (the compiler may fuse everything else).
  step();
  std::vector<Tensor> outputs;
  {
    std::vector<Tensor> values(fn.ops.size());
    auto resolve = [&](const Ref& r) -> Value {
      Value v;
      switch (r.kind) {
        case Ref::None: break;
        case Ref::Input: v.kind = KILN_VALUE_TENSOR; v.tensor = inputs[r.index]; break;
        case Ref::Op: v.kind = KILN_VALUE_TENSOR; v.tensor = values[r.index]; break;
        case Ref::Constant: v.kind = KILN_VALUE_TENSOR; v.tensor = fn.constants[r.index]; break;
        case Ref::Number: v = r.number; break;
      }
      return v;
    };
    std::vector<Value> args;
    for (size_t k = 0; k < fn.ops.size(); ++k) {
      const CapturedOp& op = fn.ops[k];
      args.clear();
      for (const Ref& r : op.inputs) args.push_back(resolve(r));
      values[k] = invoke(op.op, args, op.attrs);
    }
    for (const Ref& r : fn.results) outputs.push_back(resolve(r).tensor);
  }
  step();
  return outputs;
}

std::vector<TensorSpec> specsOf(const std::vector<Tensor>& ts) {
  std::vector<TensorSpec> out;
  for (const Tensor& t : ts) out.push_back({t.dtype(), t.shape()});
  return out;
}

/// Runs the function jit_threshold times on zeros so that its trace is hot.
void warmUp(const Function& fn) {
  if (settings().jit == JitMode::Off) return;
  try {
    std::vector<Tensor> zeros;
    for (const TensorSpec& s : fn.inputs) {
      // Materialized like real inputs (parameters of the trace), not recorded.
      // An input too large to make dense (a broadcast view) fails here.
      std::vector<char> bytes(core::requireDenseBytes("warm-up input", s.shape, s.dtype), 0);
      zeros.push_back(detail::fromHost(bytes.data(), static_cast<size_t>(s.shape.numel()), s.dtype, s.shape, Device::cpu()));
    }
    for (int64_t i = 0; i < settings().jit_threshold; ++i) run(fn, zeros);
  } catch (const Error& e) {
    exec::log().info("kiln_capture_end: warm-up run on zeros failed ({}); the function compiles on its own calls",
                     e.what());
  } catch (const std::bad_alloc&) {
    exec::log().info("kiln_capture_end: no memory for a warm-up run on zeros; the function compiles on its own calls");
  }
}

std::shared_ptr<const Function> functionOf(kiln_function f, const char* what) {
  return functionHandles().get(bits(f), what);
}

kiln_function newFunctionHandle(std::shared_ptr<const Function> fn) {
  return reinterpret_cast<kiln_function>(static_cast<uintptr_t>(functionHandles().insert(std::move(fn))));
}

std::vector<Tensor> tensorsOf(const kiln_tensor* ts, int32_t n, const char* what) {
  if (n < 0) fail(KILN_ERROR_INVALID_ARGUMENT, std::string("the number of ") + what + " is negative");
  if (n > 0 && !ts) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL but its count is " + std::to_string(n));
  std::vector<Tensor> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(tensorOf(ts[i], (std::string(what) + " " + std::to_string(i)).c_str()));
  return out;
}

}  // namespace

bool captureActive() { return tCapture != nullptr; }

void captureOp(kiln_op op, std::span<const Value> inputs, std::span<const Attr> attrs, const Tensor& result) {
  CaptureState& c = *tCapture;
  CapturedOp rec{op, {}, std::vector<Attr>(attrs.begin(), attrs.end())};
  for (const Value& v : inputs) {
    if (v.kind == KILN_VALUE_TENSOR) {
      rec.inputs.push_back(refOf(c, v.tensor));
    } else if (v.kind == KILN_VALUE_NONE) {
      rec.inputs.push_back(Ref{});
    } else {
      Ref r{Ref::Number, 0, {}};
      r.number.kind = v.kind;
      r.number.f = v.f;
      r.number.i = v.i;
      rec.inputs.push_back(r);
    }
  }
  const auto index = static_cast<uint32_t>(c.fn.ops.size());
  c.fn.ops.push_back(std::move(rec));
  c.known[result.impl()] = Ref{Ref::Op, index, {}};
  c.keepAlive.push_back(result);
}

}  // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

kiln_status kiln_capture_begin(const kiln_tensor* inputs, int32_t num_inputs) {
  return guarded(__func__, [&] {
    if (tCapture) fail(KILN_ERROR_STATE, "a capture is already in progress on this thread; end or abort it first");
    std::vector<Tensor> ins = tensorsOf(inputs, num_inputs, "inputs");
    auto c = std::make_unique<CaptureState>();
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!c->known.emplace(ins[i].impl(), Ref{Ref::Input, static_cast<uint32_t>(i), {}}).second)
        fail(KILN_ERROR_INVALID_ARGUMENT, "input " + std::to_string(i) + " is the same tensor as an earlier input");
    }
    c->fn.inputs = specsOf(ins);
    c->keepAlive = std::move(ins);
    tCapture = std::move(c);
  });
}

kiln_status kiln_capture_end(const kiln_tensor* outputs, int32_t num_outputs, uint32_t flags, kiln_function* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    if (!tCapture) fail(KILN_ERROR_STATE, "no capture in progress on this thread; call kiln_capture_begin first");
    if (flags & ~KILN_CAPTURE_COMPILE_NOW)
      fail(KILN_ERROR_INVALID_ARGUMENT, "unknown flags " + std::to_string(flags & ~KILN_CAPTURE_COMPILE_NOW));
    std::vector<Tensor> outs = tensorsOf(outputs, num_outputs, "outputs");
    if (outs.empty()) fail(KILN_ERROR_INVALID_ARGUMENT, "a function needs at least one output");
    // The capture stays active when the arguments are bad, so the caller can retry.
    std::unique_ptr<CaptureState> c = std::move(tCapture);
    for (const Tensor& t : outs) c->fn.results.push_back(refOf(*c, t));
    c->fn.outputs = specsOf(outs);
    auto fn = std::make_shared<const Function>(std::move(c->fn));
    c.reset();
    if (flags & KILN_CAPTURE_COMPILE_NOW) warmUp(*fn);
    *out = newFunctionHandle(std::move(fn));
  });
}

kiln_status kiln_capture_abort(void) {
  return guarded(__func__, [&] {
    if (!tCapture) fail(KILN_ERROR_STATE, "no capture in progress on this thread");
    tCapture.reset();
  });
}

kiln_status kiln_function_retain(kiln_function function) {
  return guarded(__func__, [&] { functionHandles().retain(bits(function), "function"); });
}

kiln_status kiln_function_release(kiln_function function) {
  return guarded(__func__, [&] { functionHandles().release(bits(function), "function"); });
}

kiln_status kiln_function_num_inputs(kiln_function function, int32_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = static_cast<int32_t>(functionOf(function, "function")->inputs.size());
  });
}

kiln_status kiln_function_num_outputs(kiln_function function, int32_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = static_cast<int32_t>(functionOf(function, "function")->outputs.size());
  });
}

kiln_status kiln_function_num_ops(kiln_function function, int32_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = static_cast<int32_t>(functionOf(function, "function")->ops.size());
  });
}

kiln_status kiln_function_signature(kiln_function function, int32_t is_output, int32_t index, kiln_dtype* dtype,
                                    int64_t* dims, int32_t capacity, int32_t* rank) {
  return guarded(__func__, [&] {
    auto fn = functionOf(function, "function");
    const std::vector<TensorSpec>& specs = is_output ? fn->outputs : fn->inputs;
    if (index < 0 || static_cast<size_t>(index) >= specs.size())
      fail(KILN_ERROR_INVALID_ARGUMENT, std::string(is_output ? "output" : "input") + " index " +
                                            std::to_string(index) + " is outside 0 to " +
                                            std::to_string(static_cast<int64_t>(specs.size()) - 1));
    const TensorSpec& s = specs[index];
    if (dims && capacity < s.shape.rank())
      fail(KILN_ERROR_BUFFER_TOO_SMALL, "capacity " + std::to_string(capacity) + " is below the rank " +
                                            std::to_string(s.shape.rank()));
    if (dtype) *dtype = cDType(s.dtype);
    if (rank) *rank = s.shape.rank();
    if (dims)
      for (int d = 0; d < s.shape.rank(); ++d) dims[d] = s.shape[d];
  });
}

kiln_status kiln_function_call(kiln_function function, const kiln_tensor* inputs, int32_t num_inputs,
                               kiln_tensor* outputs, int32_t num_outputs) {
  return guarded(__func__, [&] {
    auto fn = functionOf(function, "function");
    std::vector<Tensor> ins = tensorsOf(inputs, num_inputs, "inputs");
    if (num_outputs != static_cast<int32_t>(fn->outputs.size()))
      fail(KILN_ERROR_INVALID_ARGUMENT, "the function has " + std::to_string(fn->outputs.size()) +
                                            " output(s), num_outputs is " + std::to_string(num_outputs));
    required(outputs, "outputs");
    checkSignature(*fn, specsOf(ins));
    std::vector<Tensor> outs = run(*fn, ins);
    std::vector<kiln_tensor> handles;
    try {
      for (Tensor& t : outs) handles.push_back(newTensorHandle(std::move(t)));
    } catch (...) {
      for (kiln_tensor h : handles) tensorHandles().release(bits(h), "output");
      throw;
    }
    for (size_t i = 0; i < handles.size(); ++i) outputs[i] = handles[i];
  });
}

kiln_status kiln_function_call_dlpack(kiln_function function, DLManagedTensor* const* inputs, int32_t num_inputs,
                                      DLManagedTensor** outputs, int32_t num_outputs) {
  return guarded(__func__, [&] {
    auto fn = functionOf(function, "function");
    if (num_inputs < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "num_inputs is negative");
    if (num_inputs > 0) required(inputs, "inputs");
    if (num_outputs != static_cast<int32_t>(fn->outputs.size()))
      fail(KILN_ERROR_INVALID_ARGUMENT, "the function has " + std::to_string(fn->outputs.size()) +
                                            " output(s), num_outputs is " + std::to_string(num_outputs));
    required(outputs, "outputs");
    // Check everything before taking ownership of anything.
    std::vector<DLPackView> views;
    std::vector<TensorSpec> specs;
    for (int32_t i = 0; i < num_inputs; ++i) {
      for (int32_t j = 0; j < i; ++j)
        if (inputs[j] == inputs[i])
          fail(KILN_ERROR_INVALID_ARGUMENT, "input " + std::to_string(i) + " is the same DLManagedTensor as input " +
                                                std::to_string(j) + " (each is consumed once)");
      views.push_back(inspectDLPack(inputs[i], ("input " + std::to_string(i)).c_str()));
      specs.push_back({views.back().dtype, views.back().shape});
    }
    checkSignature(*fn, specs);
    std::vector<Tensor> ins;
    for (int32_t i = 0; i < num_inputs; ++i) {
      try {
        ins.push_back(adoptDLPack(inputs[i], views[i]));
      } catch (...) {
        // Out of memory while adopting: consume the rest too, as documented.
        for (int32_t j = i; j < num_inputs; ++j)
          if (inputs[j]->deleter) inputs[j]->deleter(inputs[j]);
        throw;
      }
    }
    // The inputs are Kiln's now: whatever fails from here on fails while
    // running, a status that tells the caller so (KILN_ERROR_OP, or
    // KILN_ERROR_OUT_OF_MEMORY); an output that cannot be exported (on a
    // device DLPack has no type for) said KILN_ERROR_DEVICE, and a caller
    // following the header ran the inputs' deleters a second time.
    try {
      std::vector<Tensor> outs = run(*fn, ins);
      ins.clear();
      std::vector<DLManagedTensor*> exported;
      try {
        for (const Tensor& t : outs) exported.push_back(exportDLPack(t));
      } catch (...) {
        for (DLManagedTensor* m : exported) m->deleter(m);
        throw;
      }
      for (size_t i = 0; i < exported.size(); ++i) outputs[i] = exported[i];
    } catch (const StatusError& e) {
      if (e.status() == KILN_ERROR_OP || e.status() == KILN_ERROR_OUT_OF_MEMORY) throw;
      fail(KILN_ERROR_OP, std::string(e.what()) + " (the inputs were consumed)");
    } catch (const kiln::Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      fail(KILN_ERROR_OP, std::string(e.what()) + " (the inputs were consumed)");
    } catch (...) {
      fail(KILN_ERROR_OP, "unknown exception (the inputs were consumed)");
    }
  });
}

}  // extern "C"
