// Calls a templated lambda with the C++ type of a dtype (non-half ones;
// dispatchStorage: half ones as their bits).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::interp {

[[noreturn]] inline void unsupportedDType(const char* what, DType t) {
  throw Error(std::string(what) + ": dtype " + std::string(dtype_name(t)) + " is not supported here");
}

template <class F>
void dispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::f64: f.template operator()<double>(); return;
    default: unsupportedDType("kernel", t);
  }
}

template <class F>
void dispatchNumeric(DType t, F&& f) {
  switch (t) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::f64: f.template operator()<double>(); return;
    case DType::i64: f.template operator()<int64_t>(); return;
    case DType::i32: f.template operator()<int32_t>(); return;
    case DType::i8: f.template operator()<int8_t>(); return;
    case DType::u8: f.template operator()<uint8_t>(); return;
    default: unsupportedDType("kernel", t);
  }
}

template <class F>
void dispatchAll(DType t, F&& f) {
  if (t == DType::boolean) {
    f.template operator()<bool>();
    return;
  }
  dispatchNumeric(t, std::forward<F>(f));
}

/// dispatchAll, with f16 and bf16 as their 16-bit storage (uint16_t): for
/// kernels that move values without computing with them.
template <class F>
void dispatchStorage(DType t, F&& f) {
  if (t == DType::f16 || t == DType::bf16) {
    f.template operator()<uint16_t>();
    return;
  }
  dispatchAll(t, std::forward<F>(f));
}

}  // namespace kiln::interp
