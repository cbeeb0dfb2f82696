/* Kiln's C ABI: a stable C99 interface for frameworks that use Kiln as a
 * kernel backend.
 *
 * Conventions
 * - Objects are opaque handles (kiln_tensor, kiln_function) with explicit
 *   retain/release. A handle is a checked token, not a pointer: a null,
 *   released, forged or wrong-kind handle is reported as
 *   KILN_ERROR_INVALID_HANDLE, never dereferenced.
 * - Every call that can fail returns a kiln_status. Results come back through
 *   out-parameters, which are written only on success.
 * - kiln_last_error() is the message of the most recent call on the calling
 *   thread that failed; every fallible call clears it first, so it is "" after
 *   a success.
 * - No C++ exception ever leaves a Kiln function.
 * - Tensors are immutable values. Memory handed to Kiln (kiln_tensor_from_dlpack)
 *   must not change while Kiln uses it; memory handed out
 *   (kiln_tensor_to_dlpack) must not be written.
 * - Ops record lazily into the calling thread's trace, exactly as the C++ API
 *   does: hot traces are compiled and cached, and the same handles work from
 *   any thread.
 *
 * DLPack: the functions take `struct DLManagedTensor` from <dlpack/dlpack.h>
 * (any DLPack >= 0.6), and the *_versioned ones DLPack 1.x's `struct
 * DLManagedTensorVersioned` (dlpack.h >= 1.0, or
 * runtime/capi/DLPackVersioned.h for older headers); this header only
 * forward-declares them.
 */
#ifndef KILN_KILN_C_H
#define KILN_KILN_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API __declspec(dllimport)
#else
#define KILN_API __attribute__((visibility("default")))
#endif

/* Bumped whenever a function signature, struct layout or enum value of this
 * header changes incompatibly. runtime/capi/kiln_c.abi records the ABI of
 * each version; the kiln_capi_abi test fails when they disagree. */
#define KILN_ABI_VERSION 5

struct DLManagedTensor;
struct DLManagedTensorVersioned;

typedef struct kiln_tensor_t* kiln_tensor;
typedef struct kiln_function_t* kiln_function;

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* null pointer, bad count, unknown op/attribute/option */
  KILN_ERROR_INVALID_HANDLE = 2,   /* null, released, forged or wrong-kind handle */
  KILN_ERROR_DTYPE = 3,            /* unsupported or mismatched element type */
  KILN_ERROR_SHAPE = 4,            /* bad shape/rank/strides, or a shape that differs from a captured one */
  KILN_ERROR_DEVICE = 5,           /* memory on a device this build cannot use */
  KILN_ERROR_OP = 6,               /* an op rejected its operands, or a computation failed (see message) */
  KILN_ERROR_BUFFER_TOO_SMALL = 7, /* an output buffer is too small; the size needed is reported */
  KILN_ERROR_OUT_OF_MEMORY = 8,
  KILN_ERROR_STATE = 9,            /* not valid now (e.g. kiln_capture_end without kiln_capture_begin) */
  KILN_ERROR_INTERNAL = 10         /* an unexpected failure inside Kiln */
} kiln_status;

typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F64 = 1,
  KILN_DTYPE_F16 = 2,
  KILN_DTYPE_BF16 = 3,
  KILN_DTYPE_I64 = 4,
  KILN_DTYPE_I32 = 5,
  KILN_DTYPE_I8 = 6,
  KILN_DTYPE_U8 = 7,
  KILN_DTYPE_BOOL = 8 /* one byte holding 0 or 1 */
} kiln_dtype;

typedef enum kiln_device_kind {
  KILN_DEVICE_CPU = 0,
  KILN_DEVICE_CUDA = 1,
  KILN_DEVICE_LEVEL_ZERO = 2,
  KILN_DEVICE_TEST = 3 /* CPU-backed, not host-accessible (KILN_TEST_DEVICES) */
} kiln_device_kind;

typedef struct kiln_device {
  int32_t kind; /* a kiln_device_kind */
  int32_t index;
} kiln_device;

/* Every public op. Values are stable: never changed or reused.
 * The primitives' values come from their rows in kiln/op_table.def
 * (CAbi(NAME, value): KILN_OP_NAME = value); the ops that record other
 * primitives are listed here. A new value is a compatible addition (no
 * KILN_ABI_VERSION bump); kiln_op_from_name finds it by name.
 *
 * Inputs and attributes of the primitives (kiln_call):
 *   creation (no inputs; attributes give shape, dtype, values): FULL, ARANGE,
 *     RAND, RANDN, and ZEROS, ONES, ZEROS_LIKE, ONES_LIKE, SCALAR_TENSOR below
 *   binary elementwise and comparisons: either input may be a scalar value;
 *     FMOD: truncated remainder, a's sign; REMAINDER: floored remainder, b's
 *     sign (integer x % 0 is 0 for both)
 *   WHERE: inputs cond, a, b (a and b may be scalars)
 *   CAST: attribute dtype
 *   SUM (attributes: axes (default: all), keepdim), MAX, MIN, PROD: the same
 *   ARGMAX, ARGMIN: attributes axis (required), keepdim, select_last_index
 *     (ties: last index)
 *   RESHAPE: attribute shape (one extent may be -1)
 *   PERMUTE: attribute perm
 *   BROADCAST_TO: attribute shape
 *   SLICE: attributes axis, start (0), stop (end), step (1; negative:
 *     reversed, start (last) and stop (before the first) default like
 *     Python's)
 *   CONCAT: inputs one or more tensors; attribute axis (0)
 *   INDEX_SELECT, GATHER: inputs x, index; attribute axis
 *   INDEX_ADD, SCATTER_ADD: inputs x, index, source; attribute axis
 *   CUMSUM: input x; attribute axis
 *   CONV2D: inputs x, weight [C_out, C/group, kH, kW], bias (optional);
 *     attributes strides, pads, dilations, group (1), auto_pad,
 *     channels_last
 * Convolution and pooling take ONNX attribute names and semantics:
 * strides, dilations: {h, w} or one value (1); pads: {h, w} or
 * {top, left, bottom, right} (0); auto_pad: 0 NOTSET, 1 VALID,
 * 2 SAME_UPPER, 3 SAME_LOWER; channels_last: NHWC input and result (0). */
typedef enum kiln_op {
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) c_abi
#define CAbi(name, value) KILN_OP_##name = value,
#define NoCAbi
#include "op_table.def"
#undef CAbi
#undef NoCAbi
  /* creation (no inputs; attributes give shape, dtype, values) */
  KILN_OP_ZEROS = 1,
  KILN_OP_ONES = 2,
  KILN_OP_ZEROS_LIKE = 4,
  KILN_OP_ONES_LIKE = 5,
  KILN_OP_SCALAR_TENSOR = 6,
  /* elementwise */
  KILN_OP_GELU = 50,        /* attribute: exact (BOOL, default 0: tanh approximation; 1: through erf) */
  KILN_OP_CLAMP = 61,       /* inputs: x, low, high (low and high may be scalars) */
  KILN_OP_ISNAN = 122,      /* bool result */
  KILN_OP_ISINF = 123,      /* bool result */
  KILN_OP_LEAKY_RELU = 124, /* attribute: negative_slope (0.01) */
  /* reductions */
  KILN_OP_MEAN = 71, /* attributes: axes (default: all), keepdim */
  /* shape */
  KILN_OP_TRANSPOSE = 91,  /* attributes: axis0 (default -2), axis1 (default -1) */
  KILN_OP_SQUEEZE = 94,    /* attribute: axes (default: all extent-1 axes) */
  KILN_OP_UNSQUEEZE = 95,  /* attribute: axis */
  KILN_OP_ONE_HOT = 100,   /* input: index; attributes: num_classes, dtype (f32) */
  KILN_OP_CONTIGUOUS = 101,
  /* nn */
  KILN_OP_SOFTMAX = 110,       /* attribute: axis (-1) */
  KILN_OP_LOG_SOFTMAX = 111,   /* attribute: axis (-1) */
  KILN_OP_LAYER_NORM = 112,    /* inputs: x, weight (optional), bias (optional); attribute: eps (1e-5) */
  KILN_OP_CROSS_ENTROPY = 113, /* inputs: logits [N, C], targets [N] */
  /* pooling and normalization (ONNX conventions, as CONV2D) */
  KILN_OP_MAX_POOL2D = 131,          /* attributes: kernel_shape (required), strides, pads, dilations,
                                        ceil_mode (0), auto_pad, channels_last */
  KILN_OP_AVG_POOL2D = 132,          /* attributes: kernel_shape (required), strides, pads, dilations,
                                        ceil_mode (0), count_include_pad (0), auto_pad, channels_last */
  KILN_OP_ADAPTIVE_AVG_POOL2D = 133, /* attributes: output_size ({h, w} or one value, required), channels_last */
  KILN_OP_BATCH_NORM = 134           /* inputs: x, weight, bias, running_mean, running_var (each optional but x;
                                        the running statistics are required for inference); attributes:
                                        training_mode (0), momentum (0.9), epsilon (1e-5), channels_last;
                                        result: y (the updated running statistics are C++-only) */
} kiln_op;

/* An op input: a tensor, a number, or nothing (an optional input left out). */
typedef enum kiln_value_kind {
  KILN_VALUE_NONE = 0,
  KILN_VALUE_TENSOR = 1,
  KILN_VALUE_FLOAT = 2, /* promotes like a C++ double: f32 unless a tensor is floating */
  KILN_VALUE_INT = 3,   /* promotes like a C++ integer */
  KILN_VALUE_BOOL = 4
} kiln_value_kind;

typedef struct kiln_value {
  int32_t kind; /* a kiln_value_kind */
  int32_t reserved;
  kiln_tensor tensor; /* KILN_VALUE_TENSOR */
  double f;           /* KILN_VALUE_FLOAT */
  int64_t i;          /* KILN_VALUE_INT, KILN_VALUE_BOOL (0 or 1) */
} kiln_value;

/* A named, typed op attribute. Names and defaults are listed at kiln_op.
 * Numbers are lenient: an INT is accepted where a FLOAT is expected and a
 * BOOL where an INT is; anything else is KILN_ERROR_INVALID_ARGUMENT, as is an
 * attribute the op does not take. */
typedef enum kiln_attr_kind {
  KILN_ATTR_INT = 1,
  KILN_ATTR_FLOAT = 2,
  KILN_ATTR_INTS = 3,  /* axes, shape, perm */
  KILN_ATTR_DTYPE = 4, /* i holds a kiln_dtype */
  KILN_ATTR_BOOL = 5   /* i holds 0 or 1 */
} kiln_attr_kind;

typedef struct kiln_attr {
  const char* name;
  int32_t kind;        /* a kiln_attr_kind */
  int32_t count;       /* KILN_ATTR_INTS: number of elements at ints */
  int64_t i;           /* INT, BOOL, DTYPE */
  double f;            /* FLOAT */
  const int64_t* ints; /* INTS */
} kiln_attr;

/* Process-wide counters (see kiln::Stats). Set struct_size to
 * sizeof(kiln_stats) before calling kiln_get_stats; fields past struct_size
 * are left alone, so older callers keep working when fields are appended. */
typedef struct kiln_stats {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t traces_recorded;
  uint64_t ops_recorded;
  uint64_t ops_eliminated;
  uint64_t interpreted_runs;
  uint64_t interpreted_ops;
  uint64_t distinct_trace_keys;
  uint64_t bytes_allocated;
  uint64_t allocator_cache_hits;
  uint64_t allocator_bytes_reserved;
  uint64_t allocator_bytes_peak;
  uint64_t flushes_size_limit;
  uint64_t flushes_cross_thread;
  uint64_t compiles;
  uint64_t compile_failures;
  uint64_t compiled_runs;
  uint64_t kernel_launches;
  double compile_ms;
  uint64_t live_tensor_handles;   /* kiln_tensor handles not yet released */
  uint64_t live_function_handles; /* kiln_function handles not yet released */
} kiln_stats;

/* kiln_capture_end flags. */
#define KILN_CAPTURE_DEFAULT 0u
/* Run the function jit_threshold times at once on zero-filled inputs of the
 * captured shapes, so its trace is hot before the first real call: with
 * KILN_JIT=sync its kernels are compiled when kiln_capture_end returns, with
 * KILN_JIT=async the compile is queued. */
#define KILN_CAPTURE_COMPILE_NOW 1u

/* ---- errors and versions ----------------------------------------------- */

/* Message of the last failed call on this thread ("" if none). Valid until the
 * next Kiln call on this thread. Never NULL. */
KILN_API const char* kiln_last_error(void);
/* "KILN_OK", "KILN_ERROR_SHAPE", ...; "unknown status" for other values. */
KILN_API const char* kiln_status_string(kiln_status status);
/* The KILN_ABI_VERSION the library was built with. */
KILN_API int32_t kiln_abi_version(void);
/* "0.1.0". Never NULL. */
KILN_API const char* kiln_version_string(void);
/* Any of the pointers may be NULL. */
KILN_API kiln_status kiln_version(int32_t* major, int32_t* minor, int32_t* patch, int32_t* abi_version);

/* ---- tensors ------------------------------------------------------------- */

/* Copies `data_bytes` bytes of dense row-major host data. data_bytes must equal
 * numel * element size. */
KILN_API kiln_status kiln_tensor_from_host(const void* data, size_t data_bytes, kiln_dtype dtype,
                                           const int64_t* shape, int32_t rank, kiln_tensor* out);
/* Wraps a DLPack tensor without copying (strides, byte_offset, f16/bf16/bool
 * included; CPU memory only). On success Kiln owns `src` and calls its deleter
 * exactly once, after its last use of the memory (which may be after the
 * handle is released, while a trace still reads it). On failure the caller
 * still owns `src`. */
KILN_API kiln_status kiln_tensor_from_dlpack(struct DLManagedTensor* src, kiln_tensor* out);
/* Exports a tensor without copying (a pending tensor is computed first). The
 * consumer owns *out and must call (*out)->deleter(*out) once; until then
 * Kiln's buffer stays alive, even after the handle is released. The memory
 * must not be written. */
KILN_API kiln_status kiln_tensor_to_dlpack(kiln_tensor tensor, struct DLManagedTensor** out);
/* The same with DLPack 1.x versioned tensors. from: a tensor of another
 * major version is refused (KILN_ERROR_INVALID_ARGUMENT); a read-only one is
 * accepted (Kiln never writes memory it did not allocate). to: a DLPack 1.0
 * tensor with DLPACK_FLAG_BITMASK_READ_ONLY set. */
KILN_API kiln_status kiln_tensor_from_dlpack_versioned(struct DLManagedTensorVersioned* src, kiln_tensor* out);
KILN_API kiln_status kiln_tensor_to_dlpack_versioned(kiln_tensor tensor, struct DLManagedTensorVersioned** out);
KILN_API kiln_status kiln_tensor_retain(kiln_tensor tensor);
/* Drops one reference; the handle is invalid once its count reaches zero. */
KILN_API kiln_status kiln_tensor_release(kiln_tensor tensor);

KILN_API kiln_status kiln_tensor_dtype(kiln_tensor tensor, kiln_dtype* out);
KILN_API kiln_status kiln_tensor_rank(kiln_tensor tensor, int32_t* out);
/* Writes `rank` extents; capacity smaller than the rank is
 * KILN_ERROR_BUFFER_TOO_SMALL. */
KILN_API kiln_status kiln_tensor_shape(kiln_tensor tensor, int64_t* dims, int32_t capacity);
KILN_API kiln_status kiln_tensor_numel(kiln_tensor tensor, int64_t* out);
KILN_API kiln_status kiln_tensor_device(kiln_tensor tensor, kiln_device* out);
/* A new handle to a copy of the tensor on `device` (the same value when it is
 * already there). Copies out of a device have finished when this returns. */
KILN_API kiln_status kiln_tensor_to_device(kiln_tensor tensor, kiln_device device, kiln_tensor* out);
/* 0 while the tensor is a pending trace value, 1 once computed. */
KILN_API kiln_status kiln_tensor_is_materialized(kiln_tensor tensor, int32_t* out);
/* Computes the tensor if pending; element strides of its buffer view. */
KILN_API kiln_status kiln_tensor_strides(kiln_tensor tensor, int64_t* strides, int32_t capacity);
/* Computes the tensor if pending; address of its first element (host
 * tensors). Valid while a handle or an exported DLPack tensor keeps it. */
KILN_API kiln_status kiln_tensor_data_pointer(kiln_tensor tensor, const void** out);
/* Computes the tensor if pending and copies its elements, row-major,
 * converted to `dtype`, into dst (dst_bytes >= numel * size of dtype). */
KILN_API kiln_status kiln_tensor_copy_to_host(kiln_tensor tensor, void* dst, size_t dst_bytes, kiln_dtype dtype);

/* ---- ops ------------------------------------------------------------------- */

/* "add", "log_softmax", ... (the C++ function names). */
KILN_API kiln_status kiln_op_from_name(const char* name, kiln_op* out);
KILN_API kiln_status kiln_op_name(kiln_op op, const char** out);
/* Records one op, exactly as the C++ function of the same name, and returns
 * its (pending) result. */
KILN_API kiln_status kiln_call(kiln_op op, const kiln_value* inputs, int32_t num_inputs, const kiln_attr* attrs,
                               int32_t num_attrs, kiln_tensor* out);
KILN_API kiln_status kiln_call_by_name(const char* op, const kiln_value* inputs, int32_t num_inputs,
                                       const kiln_attr* attrs, int32_t num_attrs, kiln_tensor* out);

/* ---- explicit capture -------------------------------------------------------
 * Between begin and end, the ops this thread records through kiln_call (and
 * kiln_function_call) are captured as well as run. Tensors that are neither
 * the declared inputs nor results of captured ops become constants of the
 * function. Calling the function re-records the captured ops on new inputs of
 * the same dtypes and shapes as one trace, so it is keyed, cached and compiled
 * like any other trace. */
KILN_API kiln_status kiln_capture_begin(const kiln_tensor* inputs, int32_t num_inputs);
KILN_API kiln_status kiln_capture_end(const kiln_tensor* outputs, int32_t num_outputs, uint32_t flags,
                                      kiln_function* out);
/* Drops the capture in progress on this thread. */
KILN_API kiln_status kiln_capture_abort(void);

KILN_API kiln_status kiln_function_retain(kiln_function function);
KILN_API kiln_status kiln_function_release(kiln_function function);
KILN_API kiln_status kiln_function_num_inputs(kiln_function function, int32_t* out);
KILN_API kiln_status kiln_function_num_outputs(kiln_function function, int32_t* out);
/* Number of ops the function records per call. */
KILN_API kiln_status kiln_function_num_ops(kiln_function function, int32_t* out);
/* dtype and shape of input (is_output = 0) or output (is_output = 1) `index`. */
KILN_API kiln_status kiln_function_signature(kiln_function function, int32_t is_output, int32_t index,
                                             kiln_dtype* dtype, int64_t* dims, int32_t capacity, int32_t* rank);
/* Runs the function; outputs are new handles (computed when this returns). */
KILN_API kiln_status kiln_function_call(kiln_function function, const kiln_tensor* inputs, int32_t num_inputs,
                                        kiln_tensor* outputs, int32_t num_outputs);
/* The same with DLPack tensors in and out. Inputs are consumed as by
 * kiln_tensor_from_dlpack when the call succeeds or fails while running
 * (KILN_ERROR_OP, KILN_ERROR_OUT_OF_MEMORY); on any other error the caller
 * still owns them. Each output is owned by the caller. */
KILN_API kiln_status kiln_function_call_dlpack(kiln_function function, struct DLManagedTensor* const* inputs,
                                               int32_t num_inputs, struct DLManagedTensor** outputs,
                                               int32_t num_outputs);

/* ---- runtime ----------------------------------------------------------------- */

/* Flushes this thread's trace and waits for its results. */
KILN_API kiln_status kiln_sync(void);
/* Training-loop boundary: flushes this thread's trace. */
KILN_API kiln_status kiln_step(void);
KILN_API kiln_status kiln_get_stats(kiln_stats* out);
/* The counters as one JSON object, NUL-terminated. *length (if not NULL) gets
 * the length without the NUL; a capacity below length + 1 is
 * KILN_ERROR_BUFFER_TOO_SMALL (buffer may then be NULL). */
KILN_API kiln_status kiln_stats_json(char* buffer, size_t capacity, size_t* length);
KILN_API kiln_status kiln_reset_stats(void);
/* Returns cached, unused device memory to the system. */
KILN_API kiln_status kiln_empty_cache(void);
/* Settings, by environment variable name or its lower-case short form:
 * KILN_LOG / log, KILN_MAX_TRACE_OPS / max_trace_ops, KILN_NUM_THREADS /
 * num_threads, KILN_JIT / jit (async, sync, off, replay), KILN_JIT_THRESHOLD /
 * jit_threshold, KILN_COMPILE_THREADS / compile_threads. Values are text, as
 * in the environment, with the ranges the README documents; choices take any
 * case. A value outside its range is KILN_ERROR_INVALID_ARGUMENT (the message
 * names the option, the value and the range). A new value applies to traces
 * flushed afterwards. */
KILN_API kiln_status kiln_set_option(const char* name, const char* value);
/* The current value as text, NUL-terminated (sizes as for kiln_stats_json). */
KILN_API kiln_status kiln_get_option(const char* name, char* buffer, size_t capacity, size_t* length);

/* ---- helpers to build inputs and attributes (header only) ---------------- */

static inline kiln_value kiln_value_of_tensor(kiln_tensor t) {
  kiln_value v = {KILN_VALUE_TENSOR, 0, t, 0.0, 0};
  return v;
}
static inline kiln_value kiln_value_of_float(double x) {
  kiln_value v = {KILN_VALUE_FLOAT, 0, (kiln_tensor)0, x, 0};
  return v;
}
static inline kiln_value kiln_value_of_int(int64_t x) {
  kiln_value v = {KILN_VALUE_INT, 0, (kiln_tensor)0, 0.0, x};
  return v;
}
static inline kiln_value kiln_value_none(void) {
  kiln_value v = {KILN_VALUE_NONE, 0, (kiln_tensor)0, 0.0, 0};
  return v;
}
static inline kiln_attr kiln_attr_int(const char* name, int64_t x) {
  kiln_attr a = {name, KILN_ATTR_INT, 0, x, 0.0, (const int64_t*)0};
  return a;
}
static inline kiln_attr kiln_attr_float(const char* name, double x) {
  kiln_attr a = {name, KILN_ATTR_FLOAT, 0, 0, x, (const int64_t*)0};
  return a;
}
static inline kiln_attr kiln_attr_bool(const char* name, int x) {
  kiln_attr a = {name, KILN_ATTR_BOOL, 0, x ? 1 : 0, 0.0, (const int64_t*)0};
  return a;
}
static inline kiln_attr kiln_attr_dtype(const char* name, kiln_dtype x) {
  kiln_attr a = {name, KILN_ATTR_DTYPE, 0, (int64_t)x, 0.0, (const int64_t*)0};
  return a;
}
static inline kiln_attr kiln_attr_ints(const char* name, const int64_t* xs, int32_t count) {
  kiln_attr a = {name, KILN_ATTR_INTS, count, 0, 0.0, xs};
  return a;
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KILN_KILN_C_H */
