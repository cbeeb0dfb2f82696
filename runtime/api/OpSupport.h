// Shared helpers of the op implementations: validation that names the op,
// recording, and dtype conversions inserted by type promotion.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "runtime/autograd/GradInfo.h"
#include "runtime/core/ShapeRules.h"
#include "runtime/trace/Recorder.h"

namespace kiln::api {

[[noreturn]] inline void fail(const char* op, const std::string& msg) { throw Error(std::string(op) + ": " + msg); }

/// Throws "<op>: <message>" when a core rule reports a problem.
inline void check(const char* op, const std::string& ruleResult) {
  if (!ruleResult.empty()) fail(op, ruleResult);
}

/// The tensor must be defined and on a device with a driver.
void checkTensor(const char* op, const Tensor& t, const char* name = "input");
/// All tensors on one device.
void checkSameDevice(const char* op, std::initializer_list<const Tensor*> ts);

/// Records one primitive and attaches its autograd node when an input
/// requires grad. Every op records through here.
inline Tensor record(const trace::NodeSpec& spec, std::span<const Tensor* const> inputs) {
  Tensor out = trace::Recorder::current().record(spec, inputs);
  autograd::onRecorded(out, spec, inputs);
  return out;
}
inline Tensor record(const trace::NodeSpec& spec, std::initializer_list<const Tensor*> inputs) {
  return record(spec, std::span<const Tensor* const>(inputs.begin(), inputs.size()));
}

/// x converted to dtype (x itself when it already has it).
Tensor castTo(const Tensor& x, DType dtype);
/// The dtype a normalization of `dtype` data computes its statistics in:
/// f32 for f16 and bf16 (as PyTorch's: in f16 the backward's 1/sigma^3
/// overflowed for rows whose deviation is below 0.025), else `dtype`.
inline DType statisticsDType(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype;
}
/// A rank-0 constant on `device`: the trace's node for the same value when
/// `shared` (Recorder::recordScalarConstant), else a node of its own.
Tensor constant(const Scalar& v, DType dtype, Device device, bool shared = true);
/// The dtype Operand `o` promotes as (its category's dtype for a scalar).
core::TypedOperand typedOperand(const Operand& o);
/// o as a tensor of dtype (a rank-0 constant on `device` for a scalar).
Tensor operandAs(const Operand& o, DType dtype, Device device, bool sharedConstant = true);
/// The device of the tensor among two operands (the default device if none).
Device deviceOf(const Operand& a, const Operand& b);
Shape operandShape(const Operand& o);

/// A zero tensor that exists now, in memory of its own, rather than a
/// recorded fill: state that a later trace reads as an input (Adam's
/// moments) then makes a first trace of the same ops as every later one.
Tensor zerosNow(const Shape& shape, DType dtype, Device device);

/// Gives each tensor of `tensors` a dense buffer of its own, in place, where
/// it has a strided view or shares its storage with an earlier one (zeros()
/// and ones() are one element broadcast, in a block shared with other
/// constants). Pending tensors are computed first. Same values.
void giveOwnDenseBuffers(std::span<Tensor* const> tensors);

/// For each of `tensors` (pending ones are computed first): whether
/// something else may reach its memory: memory Kiln does not own (an
/// imported buffer, or a view of one), a storage other views share (a view
/// of a constant or of another tensor), or the storage of an earlier one of
/// the list. Zero-size tensors have no memory to share.
std::vector<bool> sharedMemory(std::span<const Tensor> tensors);
/// The buffer `t`'s values live in, computed first (views share their
/// base's): two tensors with the same one alias.
const void* storageOf(const Tensor& t);

/// Replaces each of `tensors` whose memory something else may reach by a
/// dense copy on its device (a new tensor; the old one is left as it was):
/// memory Kiln does not own (an imported buffer, or a view of one), a
/// storage other views share (a view of a constant or of another tensor),
/// a tensor another handle holds too (a template constant passed through),
/// or one listed twice. For callers that take the memory over and may
/// write it (a framework's compiled-graph outputs). Pending tensors are
/// computed first. Returns how many it copied.
int giveExclusiveBuffers(std::span<Tensor> tensors);

std::string dtypeList(std::initializer_list<DType> ts);

}  // namespace kiln::api
