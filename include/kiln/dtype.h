// Element types and the type-promotion rule of Kiln's public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln {

/// Element type of a tensor. f16 and bf16 are stored natively (2 bytes) and
/// computed in f32; boolean is stored as one byte holding 0 or 1.
enum class DType : uint8_t { f32, f64, f16, bf16, i64, i32, i8, u8, boolean };

inline constexpr int kNumDTypes = 9;

/// Bytes per element.
std::size_t dtype_size(DType t);
/// "f32", "i64", "bool", ...
std::string_view dtype_name(DType t);
bool is_floating(DType t);  ///< f32, f64, f16, bf16
bool is_integral(DType t);  ///< i64, i32, i8, u8 (not bool)

/// Type promotion between two tensors of the same priority, PyTorch-like:
/// categories order bool < integer < floating; within a category the wider
/// type wins; i8 with u8 gives i32 (Kiln has no i16); f16 with bf16 gives
/// f32. Mixed-priority promotion (rank-0 tensors, C++ scalars) is described
/// in ops.h.
DType promote_types(DType a, DType b);

}  // namespace kiln
