// Op calls through the C ABI: owned copies of inputs and attributes, the op
// name table, and the dispatcher that forwards to the public C++ ops.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/kiln_c.h"
#include "kiln/tensor.h"

namespace kiln::capi {

/// An op input (kiln_value) holding its own tensor reference.
struct Value {
  int32_t kind = KILN_VALUE_NONE;
  Tensor tensor;
  double f = 0;
  int64_t i = 0;
};

/// An op attribute (kiln_attr) holding its own name and integers.
struct Attr {
  std::string name;
  int32_t kind = 0;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
};

/// The C++ name of an op ("add"), or nullptr for a value outside kiln_op.
const char* opName(int64_t op);
/// The op called `name`; false when there is none.
bool opFromName(const char* name, kiln_op* out);

/// Validated owned copies of C inputs and attributes (handles are resolved).
std::vector<Value> readValues(const kiln_value* inputs, int32_t count);
std::vector<Attr> readAttrs(const kiln_attr* attrs, int32_t count);

/// Runs one op through the public C++ API and, when a capture is active on
/// this thread, records it there.
Tensor invoke(kiln_op op, std::span<const Value> inputs, std::span<const Attr> attrs);
/// Runs one op through the public C++ API.
Tensor dispatch(kiln_op op, std::span<const Value> inputs, std::span<const Attr> attrs);

/// Capture hook (Capture.cpp): called after each successful invoke().
void captureOp(kiln_op op, std::span<const Value> inputs, std::span<const Attr> attrs, const Tensor& result);
bool captureActive();

}  // namespace kiln::capi
