// C ABI: op calls, trace boundaries, statistics, settings and versions.
#include <cstddef>
#include <cstring>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "kiln/ops.h"
#include "kiln/runtime.h"
#include "runtime/capi/CApiSupport.h"
#include "runtime/capi/OpCall.h"
#include "runtime/support/Settings.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif

namespace kiln::capi {
namespace {

kiln_tensor call(kiln_op op, const kiln_value* inputs, int32_t numInputs, const kiln_attr* attrs, int32_t numAttrs) {
  std::vector<Value> values = readValues(inputs, numInputs);
  std::vector<Attr> as = readAttrs(attrs, numAttrs);
  return newTensorHandle(invoke(op, values, as));
}

/// A setting kiln_set_option / kiln_get_option can reach (support/Settings.h
/// holds the names, ranges and the parser).
const exec::SettingInfo& optionOf(const char* name) {
  required(name, "name");
  const exec::SettingInfo* s = exec::findSetting(name);
  if (!s || !exec::isRuntimeOption(*s))
    fail(KILN_ERROR_INVALID_ARGUMENT, std::string("unknown option '") + name + "' (options: " +
                                          exec::runtimeOptionNames() + ", or their KILN_* environment names)");
  return *s;
}

std::mutex gOptionMutex;  // serialises read-modify-write of the settings

std::string statsJson() {
  Stats s = stats();
  std::ostringstream o;
  o.precision(17);
  o << "{";
#define KILN_STAT_JSON(name) o << "\"" #name "\": " << s.name << ", ";
  KILN_STATS_FIELDS(KILN_STAT_JSON)
#undef KILN_STAT_JSON
  o << "\"live_tensor_handles\": " << tensorHandles().live()
    << ", \"live_function_handles\": " << functionHandles().live() << "}";
  return o.str();
}

}  // namespace
}  // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

const char* kiln_status_string(kiln_status status) {
  switch (status) {
    case KILN_OK: return "KILN_OK";
    case KILN_ERROR_INVALID_ARGUMENT: return "KILN_ERROR_INVALID_ARGUMENT";
    case KILN_ERROR_INVALID_HANDLE: return "KILN_ERROR_INVALID_HANDLE";
    case KILN_ERROR_DTYPE: return "KILN_ERROR_DTYPE";
    case KILN_ERROR_SHAPE: return "KILN_ERROR_SHAPE";
    case KILN_ERROR_DEVICE: return "KILN_ERROR_DEVICE";
    case KILN_ERROR_OP: return "KILN_ERROR_OP";
    case KILN_ERROR_BUFFER_TOO_SMALL: return "KILN_ERROR_BUFFER_TOO_SMALL";
    case KILN_ERROR_OUT_OF_MEMORY: return "KILN_ERROR_OUT_OF_MEMORY";
    case KILN_ERROR_STATE: return "KILN_ERROR_STATE";
    case KILN_ERROR_INTERNAL: return "KILN_ERROR_INTERNAL";
  }
  return "unknown status";
}

int32_t kiln_abi_version(void) { return KILN_ABI_VERSION; }

const char* kiln_version_string(void) { return KILN_VERSION; }

kiln_status kiln_version(int32_t* major, int32_t* minor, int32_t* patch, int32_t* abi_version) {
  return guarded(__func__, [&] {
    int v[3] = {0, 0, 0};
    std::sscanf(KILN_VERSION, "%d.%d.%d", &v[0], &v[1], &v[2]);
    if (major) *major = v[0];
    if (minor) *minor = v[1];
    if (patch) *patch = v[2];
    if (abi_version) *abi_version = KILN_ABI_VERSION;
  });
}

kiln_status kiln_op_from_name(const char* name, kiln_op* out) {
  return guarded(__func__, [&] {
    required(name, "name");
    required(out, "out");
    if (!opFromName(name, out)) fail(KILN_ERROR_INVALID_ARGUMENT, std::string("no op is called '") + name + "'");
  });
}

kiln_status kiln_op_name(kiln_op op, const char** out) {
  return guarded(__func__, [&] {
    required(out, "out");
    const char* n = opName(op);
    if (!n) fail(KILN_ERROR_INVALID_ARGUMENT, std::to_string(static_cast<int64_t>(op)) + " is not a kiln_op");
    *out = n;
  });
}

kiln_status kiln_call(kiln_op op, const kiln_value* inputs, int32_t num_inputs, const kiln_attr* attrs,
                      int32_t num_attrs, kiln_tensor* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = call(op, inputs, num_inputs, attrs, num_attrs);
  });
}

kiln_status kiln_call_by_name(const char* op, const kiln_value* inputs, int32_t num_inputs, const kiln_attr* attrs,
                              int32_t num_attrs, kiln_tensor* out) {
  return guarded(__func__, [&] {
    required(op, "op");
    required(out, "out");
    kiln_op k;
    if (!opFromName(op, &k)) fail(KILN_ERROR_INVALID_ARGUMENT, std::string("no op is called '") + op + "'");
    *out = call(k, inputs, num_inputs, attrs, num_attrs);
  });
}

kiln_status kiln_sync(void) {
  return guarded(__func__, [] { kiln::sync(); });
}

kiln_status kiln_step(void) {
  return guarded(__func__, [] { kiln::step(); });
}

kiln_status kiln_get_stats(kiln_stats* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    const uint32_t size = out->struct_size;
    if (size < offsetof(kiln_stats, traces_recorded))
      fail(KILN_ERROR_INVALID_ARGUMENT, "out->struct_size is " + std::to_string(size) +
                                            "; set it to sizeof(kiln_stats)");
    Stats s = stats();
    kiln_stats full{};
    full.struct_size = size < sizeof(kiln_stats) ? size : static_cast<uint32_t>(sizeof(kiln_stats));
    full.traces_recorded = s.traces_recorded;
    full.ops_recorded = s.ops_recorded;
    full.ops_eliminated = s.ops_eliminated;
    full.interpreted_runs = s.interpreted_runs;
    full.interpreted_ops = s.interpreted_ops;
    full.distinct_trace_keys = s.distinct_trace_keys;
    full.bytes_allocated = s.bytes_allocated;
    full.allocator_cache_hits = s.allocator_cache_hits;
    full.allocator_bytes_reserved = s.allocator_bytes_reserved;
    full.allocator_bytes_peak = s.allocator_bytes_peak;
    full.flushes_size_limit = s.flushes_size_limit;
    full.flushes_cross_thread = s.flushes_cross_thread;
    full.compiles = s.compiles;
    full.compile_failures = s.compile_failures;
    full.compiled_runs = s.compiled_runs;
    full.kernel_launches = s.kernel_launches;
    full.compile_ms = s.compile_ms;
    full.live_tensor_handles = tensorHandles().live();
    full.live_function_handles = functionHandles().live();
    std::memcpy(out, &full, full.struct_size);
  });
}

kiln_status kiln_stats_json(char* buffer, size_t capacity, size_t* length) {
  return guarded(__func__, [&] { writeText(statsJson(), buffer, capacity, length); });
}

kiln_status kiln_reset_stats(void) {
  return guarded(__func__, [] { kiln::reset_stats(); });
}

kiln_status kiln_empty_cache(void) {
  return guarded(__func__, [] { kiln::empty_cache(); });
}

kiln_status kiln_set_option(const char* name, const char* value) {
  return guarded(__func__, [&] {
    const exec::SettingInfo& o = optionOf(name);
    required(value, "value");
    std::lock_guard<std::mutex> lock(gOptionMutex);
    Settings s = settings();
    if (std::string e = exec::applySetting(o, value, exec::SettingSource::Option, s); !e.empty())
      fail(KILN_ERROR_INVALID_ARGUMENT, e);
    set_settings(s);
  });
}

kiln_status kiln_get_option(const char* name, char* buffer, size_t capacity, size_t* length) {
  return guarded(__func__, [&] { writeText(exec::settingText(optionOf(name), settings()), buffer, capacity, length); });
}

}  // extern "C"
