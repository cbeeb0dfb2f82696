// Captured traces run again on new inputs without recording them op by op:
// what a framework's graph runner needs when the same graph runs every step.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

namespace detail {
struct TraceTemplateData;
}

/// The ops this thread has recorded since its last flush, kept so that they
/// can be run again on other input tensors of the same dtypes and shapes.
/// A run installs the captured nodes as the thread's trace in one copy and
/// flushes it: the TraceKey of recording the same ops again and keeping only
/// the outputs (so the same compiled kernels and cache entries), without the
/// per-op cost.
///
/// A run replays the ops exactly as captured: their attributes are fixed
/// (a random op replays its recorded seed) and no autograd graph is
/// recorded. Templates are immutable; any thread may run one.
class TraceTemplate {
 public:
  /// Captures the calling thread's pending trace (not flushed; the recorder
  /// keeps it). Every tensor the trace reads must be one of `inputs`
  /// (replaced at each run, in this order) or `constants` (read again at
  /// each run); `outputs` are what a run returns: values recorded in this
  /// trace, inputs or constants. Throws kiln::Error otherwise, e.g. when
  /// the trace was flushed while the ops were being recorded.
  static TraceTemplate capture(std::span<const Tensor> inputs, std::span<const Tensor> constants,
                               std::span<const Tensor> outputs);

  /// Flushes this thread's pending trace, records the captured ops on
  /// `inputs` and computes them; returns the outputs (materialized). Throws
  /// kiln::Error when an input's count, dtype, shape or device differs from
  /// the capture, before anything is recorded.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;

  /// Ops a run records (parameters excluded).
  size_t num_ops() const;
  size_t num_inputs() const;
  size_t num_outputs() const;

 private:
  explicit TraceTemplate(std::shared_ptr<const detail::TraceTemplateData> data) : data_(std::move(data)) {}
  std::shared_ptr<const detail::TraceTemplateData> data_;
};

}  // namespace kiln
