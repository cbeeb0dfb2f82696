// dtypes, devices, trace boundaries (sync, step), stats, settings, autograd
// functions and the optimizers.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>

#include "python/src/Convert.h"
#include "runtime/api/OpSupport.h"
#include "runtime/support/Settings.h"

namespace kiln::python {

namespace {

/// An optimizer and the Python kiln.Tensor objects whose C++ handles it
/// updates in place (step() rebinds them, as in C++).
struct PyOptimizer {
  std::unique_ptr<optim::Optimizer> impl;
  std::vector<nb::object> params;
};

std::vector<Tensor*> paramPointers(nb::handle params, std::vector<nb::object>& keep) {
  std::vector<Tensor*> ptrs;
  for (nb::handle p : params) {
    if (!nb::isinstance<Tensor>(p)) throw nb::type_error("optimizer: every parameter must be a kiln.Tensor");
    ptrs.push_back(nb::inst_ptr<Tensor>(p));
    keep.push_back(nb::borrow(p));
  }
  return ptrs;
}

/// `with kiln.no_grad():` records no autograd graph on this thread.
struct NoGrad {
  NoGrad() = default;
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
  std::vector<std::unique_ptr<NoGradGuard>> guards;  // a stack: one object may be entered again
};

}  // namespace

void bindRuntime(nb::module_& m) {
  nb::enum_<DType>(m, "DType")
      .value("f32", DType::f32)
      .value("f64", DType::f64)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("i64", DType::i64)
      .value("i32", DType::i32)
      .value("i8", DType::i8)
      .value("u8", DType::u8)
      .value("bool", DType::boolean);
  m.def("dtype_size", &dtype_size, nb::arg("dtype"));
  m.def("dtype_name", [](DType t) { return std::string(dtype_name(t)); }, nb::arg("dtype"));
  m.def("is_floating", &is_floating, nb::arg("dtype"));
  m.def("promote_types", &promote_types, nb::arg("a"), nb::arg("b"));

  nb::class_<Device> deviceClass(m, "Device", "Where a tensor lives: a small immutable, hashable value.");
  nb::enum_<Device::Kind>(deviceClass, "Kind")
      .value("CPU", Device::CPU)
      .value("CUDA", Device::CUDA)
      .value("LevelZero", Device::LevelZero)
      .value("Test", Device::Test);
  deviceClass.def(nb::init<>())
      .def("__init__", [](Device* d, const std::string& text) { new (d) Device(Device::parse(text)); })
      .def_ro("kind", &Device::kind)
      .def_ro("index", &Device::index)
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "kiln.Device(\"" + d.str() + "\")"; })
      .def("__eq__", [](const Device& a, nb::handle b) {
        if (nb::isinstance<Device>(b)) return a == nb::cast<Device>(b);
        if (nb::isinstance<nb::str>(b)) return a == Device::parse(nb::cast<std::string>(b));
        return false;
      })
      .def("__hash__", [](const Device& d) { return std::hash<Device>()(d); });
  nb::implicitly_convertible<std::string, Device>();
  m.def("default_device", &default_device);
  m.def("set_default_device", [](nb::handle d) { set_default_device(toDevice(d)); }, nb::arg("device"));
  m.def("device_count", &device_count, nb::arg("kind"));

  m.def("sync", [] {
    nb::gil_scoped_release release;
    sync();
  }, "Runs this thread's trace and waits for every device.");
  m.def("step", [] {
    nb::gil_scoped_release release;
    step();
  }, "Training-loop boundary: runs this thread's trace, so each iteration records one trace that repeats.");
  m.def(
      "_storage_id",
      [](const Tensor& t) {
        nb::gil_scoped_release release;
        return reinterpret_cast<uintptr_t>(api::storageOf(t));
      },
      nb::arg("tensor"), "The buffer the tensor's values live in (computed first), as a number: equal ones alias.");
  m.def(
      "_shares_memory",
      [](const std::vector<Tensor>& tensors) {
        nb::gil_scoped_release release;
        return api::sharedMemory(tensors);
      },
      nb::arg("tensors"),
      "For each tensor: whether something else may reach its memory (an imported buffer or a view of one, a "
      "storage other views share, or an earlier tensor's): a caller that writes it must copy it first.");
  nb::class_<TraceTemplate>(m, "TraceTemplate",
                            "The ops this thread recorded since its last flush, captured to run again on new "
                            "inputs of the same dtypes and shapes without recording them op by op.")
      .def_static(
          "capture",
          [](const std::vector<Tensor>& inputs, const std::vector<Tensor>& constants,
             const std::vector<Tensor>& outputs) { return TraceTemplate::capture(inputs, constants, outputs); },
          nb::arg("inputs"), nb::arg("constants"), nb::arg("outputs"),
          "Captures this thread's pending trace (it stays pending). Every tensor it reads must be in `inputs` "
          "(replaced at each run) or `constants`; `outputs` are what run() returns.")
      .def(
          "run",
          [](const TraceTemplate& t, const std::vector<Tensor>& inputs) {
            nb::gil_scoped_release release;
            return t.run(inputs);
          },
          nb::arg("inputs"), "Flushes this thread's trace, runs the captured ops on `inputs` and returns the outputs.")
      .def(
          "_run_exclusive",
          [](const TraceTemplate& t, const std::vector<Tensor>& inputs) {
            nb::gil_scoped_release release;
            std::vector<Tensor> results = t.run(inputs);
            api::giveExclusiveBuffers(results);
            return results;
          },
          nb::arg("inputs"),
          "run(), each output in memory nothing else reaches (copied where it is a constant, a view of an input "
          "or a constant, or returned twice): for callers that write their outputs in place.")
      .def_prop_ro("num_ops", &TraceTemplate::num_ops)
      .def_prop_ro("num_inputs", &TraceTemplate::num_inputs)
      .def_prop_ro("num_outputs", &TraceTemplate::num_outputs);
  m.def("empty_cache", [] {
    nb::gil_scoped_release release;
    empty_cache();
  });

  nb::class_<Stats> statsClass(m, "Stats", "Process-wide counters (kiln.stats()).");
#define KILN_STAT(name) statsClass.def_ro(#name, &Stats::name);
  KILN_STATS_FIELDS(KILN_STAT)
#undef KILN_STAT
  statsClass.def("compiled_op_share", &Stats::compiled_op_share).def("__str__", &Stats::str).def("__repr__", &Stats::str);
  m.def("stats", [] {
    nb::gil_scoped_release release;  // waits for nothing, but other threads may hold Kiln locks
    return stats();
  });
  m.def("reset_stats", &reset_stats);

  nb::class_<Settings>(m, "Settings", "Runtime settings (see the README's environment variables).")
      .def(nb::init<>())
      .def_rw("log_level", &Settings::log_level)
      .def_rw("max_trace_ops", &Settings::max_trace_ops)
      .def_rw("num_threads", &Settings::num_threads)
      .def_prop_rw(
          "jit", [](const Settings& s) { return std::string(to_string(s.jit)); },
          [](Settings& s, const std::string& mode) {  // through the settings table, as kiln_set_option
            if (std::string error = exec::applySetting(*exec::findSetting("jit"), mode, exec::SettingSource::Option, s);
                !error.empty())
              throw Error(error);
          })
      .def_rw("jit_threshold", &Settings::jit_threshold)
      .def_rw("compile_threads", &Settings::compile_threads)
      .def_rw("max_shapes", &Settings::max_shapes)
      .def_rw("cache", &Settings::cache)
      .def_rw("tune", &Settings::tune)
      .def_rw("warm_start", &Settings::warm_start)
      .def_rw("cache_dir", &Settings::cache_dir)
      .def_rw("cache_max_mb", &Settings::cache_max_mb)
      .def_rw("replay_strict", &Settings::replay_strict)
      .def_rw("cuda_graphs", &Settings::cuda_graphs)
      .def_rw("cuda_row_kernels", &Settings::cuda_row_kernels)
      .def_rw("max_trace_keys", &Settings::max_trace_keys)
      .def_rw("test_devices", &Settings::test_devices)
      .def_rw("default_device", &Settings::default_device);
  m.def("settings", [] { return settings(); }, "A copy of the settings in force.");
  m.def("set_settings", &set_settings, nb::arg("settings"),
        "Replaces the settings; a value out of range raises kiln.Error and changes nothing.");

  // ---- autograd ----
  m.def(
      "grad",
      [](const Tensor& loss, const std::vector<Tensor>& wrt, nb::handle gradOutput, bool retainGraph,
         bool createGraph) {
        return grad(loss, wrt, gradOutput.is_none() ? Tensor() : toTensor(gradOutput, "grad"), retainGraph,
                    createGraph);
      },
      nb::arg("loss"), nb::arg("wrt"), nb::arg("grad_output") = nb::none(), nb::arg("retain_graph") = false,
      nb::arg("create_graph") = false);
  m.def("grad_mode_enabled", &grad_mode_enabled);
  nb::class_<NoGrad>(m, "no_grad", "Context manager: ops inside record no autograd graph.")
      .def(nb::init<>())
      .def("__enter__", [](NoGrad& g) { g.guards.push_back(std::make_unique<NoGradGuard>()); })
      .def("__exit__", [](NoGrad& g, nb::args) {
        if (!g.guards.empty()) g.guards.pop_back();
      });

  // ---- optimizers ----
  nb::module_ om = m.def_submodule("optim", "Optimizers: SGD, Adam, AdamW (PyTorch's update rules).");
  nb::class_<PyOptimizer>(om, "Optimizer",
                          "Updates its parameters (kiln.Tensor objects) in place: step() rebinds each to its new "
                          "value, a fresh leaf that requires grad.")
      .def("step", [](PyOptimizer& o) { o.impl->step(); })
      .def("step", [](PyOptimizer& o, const std::vector<Tensor>& grads) { o.impl->step(grads); }, nb::arg("grads"))
      .def("zero_grad", [](PyOptimizer& o) { o.impl->zero_grad(); })
      .def_prop_rw("lr", [](const PyOptimizer& o) { return o.impl->lr(); },
                   [](PyOptimizer& o, double lr) { o.impl->set_lr(lr); })
      .def_prop_ro("params", [](const PyOptimizer& o) {
        nb::list l;
        for (const nb::object& p : o.params) l.append(p);
        return l;
      });
  om.def(
      "SGD",
      [](nb::handle params, double lr, double momentum, double dampening, double weightDecay, bool nesterov) {
        auto o = std::make_unique<PyOptimizer>();
        optim::SGDOptions opts{lr, momentum, dampening, weightDecay, nesterov};
        o->impl = std::make_unique<optim::SGD>(paramPointers(params, o->params), opts);
        return o;
      },
      nb::arg("params"), nb::arg("lr") = 0.01, nb::arg("momentum") = 0.0, nb::arg("dampening") = 0.0,
      nb::arg("weight_decay") = 0.0, nb::arg("nesterov") = false);
  auto adam = [](bool decoupled) {
    return [decoupled](nb::handle params, double lr, nb::handle betas, double eps, nb::handle weightDecay) {
      auto o = std::make_unique<PyOptimizer>();
      optim::AdamOptions opts = decoupled ? optim::AdamW::defaults() : optim::AdamOptions{};
      opts.lr = lr;
      if (!betas.is_none()) {
        opts.beta1 = nb::cast<double>(betas[0]);
        opts.beta2 = nb::cast<double>(betas[1]);
      }
      opts.eps = eps;
      if (!weightDecay.is_none()) opts.weight_decay = nb::cast<double>(weightDecay);
      std::vector<Tensor*> ptrs = paramPointers(params, o->params);
      if (decoupled) o->impl = std::make_unique<optim::AdamW>(std::move(ptrs), opts);
      else o->impl = std::make_unique<optim::Adam>(std::move(ptrs), opts);
      return o;
    };
  };
  om.def("Adam", adam(false), nb::arg("params"), nb::arg("lr") = 1e-3, nb::arg("betas") = nb::none(),
         nb::arg("eps") = 1e-8, nb::arg("weight_decay") = nb::none());
  om.def("AdamW", adam(true), nb::arg("params"), nb::arg("lr") = 1e-3, nb::arg("betas") = nb::none(),
         nb::arg("eps") = 1e-8, nb::arg("weight_decay") = nb::none());
}

}  // namespace kiln::python
