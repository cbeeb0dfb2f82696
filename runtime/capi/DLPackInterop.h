// DLPack <-> Kiln tensors without copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kiln/tensor.h"
#include "runtime/capi/DLPackVersioned.h"

namespace kiln::capi {

/// A checked description of a DLPack tensor as a Kiln view (owns nothing).
struct DLPackView {
  Device device = Device::cpu();  ///< cpu:0, or cuda:i for kDLCUDA memory
  DType dtype = DType::f32;
  Shape shape;
  int64_t strides[Shape::kMaxRank] = {};
  char* base = nullptr;  ///< lowest address the view touches
  int64_t offset = 0;    ///< elements from base to element 0 (negative strides)
  size_t bytes = 0;      ///< bytes from base spanned by the view
};

/// Throws StatusError when the tensor cannot be wrapped (device, dtype,
/// shape, strides, alignment). CPU memory and CUDA device memory (kDLCUDA,
/// for a device this process has) are taken; the producer must have finished
/// writing it (DLPack without stream exchange). `what` names it in the message.
DLPackView inspectDLPack(const DLManagedTensor* m, const char* what);
/// The same for a DLPack 1.x tensor (another major version is refused; a
/// read-only one is accepted, as Kiln never writes memory it did not allocate).
DLPackView inspectDLPack(const DLManagedTensorVersioned* m, const char* what);
DLPackView inspectDLTensor(const DLTensor& t, const char* what);
/// Wraps `m` (checked by inspectDLPack) without copying; from then on Kiln
/// calls m->deleter exactly once, after the last use of the memory. Fails
/// only before taking ownership (out of memory).
Tensor adoptDLPack(DLManagedTensor* m, const DLPackView& v);
Tensor adoptDLPack(DLManagedTensorVersioned* m, const DLPackView& v);
/// Wraps the memory `v` describes; `release` runs once after its last use.
Tensor adoptView(const DLPackView& v, std::function<void()> release);
/// A DLPack view of `t` (computed first) that keeps its buffer alive: kDLCPU,
/// or kDLCUDA for a CUDA tensor (its device's work is finished first).
DLManagedTensor* exportDLPack(const Tensor& t);
/// The same as a DLPack 1.0 versioned tensor, flagged read-only (Kiln's
/// values are immutable).
DLManagedTensorVersioned* exportDLPackVersioned(const Tensor& t);

}  // namespace kiln::capi
