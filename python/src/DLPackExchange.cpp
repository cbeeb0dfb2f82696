// kiln._run_exchange: a captured trace run on another framework's tensors
// through that framework's DLPack C exchange API (DLPack 1.3's
// `__dlpack_c_exchange_api__`, PyTorch >= 2.10), one C call per tensor each
// way instead of a Python round of __dlpack__, capsule and from_dlpack per
// tensor. The PyTorch backend's replay of a graph crosses every input and
// output this way: 2.5 us per tensor through Python, where a graph call of
// the digits MLP is ~100 us.
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

#include "python/src/Convert.h"
#include "runtime/api/OpSupport.h"
#include "runtime/capi/DLPackInterop.h"

namespace kiln::python {

namespace {

/// DLPack 1.3's exchange table (dlpack.h's DLPackExchangeAPI), for builds
/// against an older <dlpack/dlpack.h>: the fields Kiln calls, in its layout.
struct ExchangeApiHeader {
  DLPackVersion version;
  ExchangeApiHeader* prev_api;
};

struct ExchangeApi {
  ExchangeApiHeader header;
  int (*managed_tensor_allocator)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                  void (*set_error)(void* error_ctx, const char* kind, const char* message));
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, DLManagedTensorVersioned** out);
  int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void** out_current_stream);
};

constexpr const char* kExchangeCapsule = "dlpack_exchange_api";

/// The table of a framework's `__dlpack_c_exchange_api__` capsule, checked
/// to be DLPack 1.x (a later major version may walk prev_api to a 1.x one).
const ExchangeApi* exchangeApi(nb::handle capsule) {
  auto* header = static_cast<ExchangeApiHeader*>(PyCapsule_GetPointer(capsule.ptr(), kExchangeCapsule));
  if (!header) throw nb::python_error();
  while (header && header->version.major > capi::kDLPackMajor) header = header->prev_api;
  if (!header || header->version.major != capi::kDLPackMajor)
    throw nb::value_error("kiln: the framework's DLPack exchange API has no DLPack 1.x table");
  return reinterpret_cast<const ExchangeApi*>(header);
}

/// A Kiln view of `object`'s memory (no copy); Kiln calls the framework's
/// deleter after its last use.
Tensor importTensor(const ExchangeApi* api, nb::handle object) {
  DLManagedTensorVersioned* m = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(object.ptr(), &m) != 0 || !m) throw nb::python_error();
  try {
    return capi::adoptDLPack(m, capi::inspectDLPack(m, "a graph input"));
  } catch (...) {
    m->deleter(m);  // not adopted: still ours to release
    throw;
  }
}

/// The framework's tensor viewing `t`'s buffer (no copy). Not flagged
/// read-only: the caller owns a graph's outputs from here on (AOTAutograd
/// accumulates gradients into them), and no Kiln value reads the buffer
/// after the run that produced it (api::giveExclusiveBuffers copied the
/// outputs whose memory something else reaches).
nb::object exportTensor(const ExchangeApi* api, DLManagedTensorVersioned* m) {
  m->flags &= ~DLPACK_FLAG_BITMASK_READ_ONLY;
  void* out = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0 || !out) throw nb::python_error();
  return nb::steal(static_cast<PyObject*>(out));
}

}  // namespace

void bindDLPackExchange(nb::module_& m) {
  m.def(
      "_run_exchange",
      [](const TraceTemplate& t, nb::handle apiCapsule, nb::handle args, const std::vector<int64_t>& positions) {
        const ExchangeApi* api = exchangeApi(apiCapsule);
        std::vector<Tensor> inputs;
        inputs.reserve(positions.size());
        for (int64_t p : positions) inputs.push_back(importTensor(api, args[p]));
        std::vector<DLManagedTensorVersioned*> exported;
        {
          nb::gil_scoped_release release;
          std::vector<Tensor> results = t.run(inputs);
          inputs.clear();
          // A template constant passed through or viewed, a view of an
          // input, a value returned twice: the caller may write its
          // outputs, so each gets memory of its own (a tensor constant's
          // clone came back as the constant, and writing it changed every
          // later call's).
          api::giveExclusiveBuffers(results);
          exported.reserve(results.size());
          try {
            for (const Tensor& r : results) exported.push_back(capi::exportDLPackVersioned(r));
          } catch (...) {
            for (DLManagedTensorVersioned* e : exported) e->deleter(e);
            throw;
          }
        }
        nb::list outputs;
        size_t i = 0;
        try {
          for (; i < exported.size(); ++i) outputs.append(exportTensor(api, exported[i]));
        } catch (...) {
          // The failed one may have been taken over already: only the rest are ours.
          for (++i; i < exported.size(); ++i) exported[i]->deleter(exported[i]);
          throw;
        }
        return outputs;
      },
      nb::arg("template"), nb::arg("api"), nb::arg("args"), nb::arg("positions"),
      "Runs `template` on args[p] for p in `positions` (tensors of the framework whose "
      "`__dlpack_c_exchange_api__` capsule is `api`), returning its outputs as that framework's tensors.");
}

}  // namespace kiln::python
