#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "runtime/core/TensorSize.h"

namespace kiln {

std::size_t dtype_size(DType t) {
  if (std::size_t size = core::elementBytes(t)) return size;
  throw Error("dtype_size: invalid DType value");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "invalid";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

bool is_integral(DType t) { return t == DType::i64 || t == DType::i32 || t == DType::i8 || t == DType::u8; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto cat = [](DType t) { return t == DType::boolean ? 0 : is_integral(t) ? 1 : 2; };
  int ca = cat(a), cb = cat(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // Integers: i8 with u8 has no common 8-bit type; Kiln has no i16, so i32.
  if ((a == DType::i8 && b == DType::u8) || (a == DType::u8 && b == DType::i8)) return DType::i32;
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

namespace {
constexpr const char* kDeviceKindNames[] = {"cpu", "cuda", "level_zero", "test"};
}  // namespace

std::string Device::str() const { return std::string(kDeviceKindNames[kind]) + ":" + std::to_string(index); }

Device Device::parse(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = text.substr(colon + 1);
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw Error("device \"" + text + "\": the index after ':' must be a number from 0 to 9999");
    index = std::stoi(digits);
  }
  for (unsigned char k = 0; k < std::size(kDeviceKindNames); ++k)
    if (name == kDeviceKindNames[k]) return Device{static_cast<Device::Kind>(k), index};
  throw Error("device \"" + text + "\" is not a device name; use cpu, cuda, level_zero or test, optionally with "
              ":index (e.g. cuda:1)");
}

}  // namespace kiln
