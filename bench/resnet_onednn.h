// The ResNet basic block of bench_suite.cpp written natively against oneDNN
// (issue 17's "ResNet block ≥ 1.0× PyTorch and oneDNN"): what a oneDNN
// expert writes for the same block, not a framework's per-op calls.
//
// The block: two 3x3 convolutions (64 channels, padding 1, no bias), batch
// norm, ReLU, identity shortcut; batch 16, 56x56, NCHW in and out, as Kiln
// and PyTorch take and return it. Inside, activations and weights live in
// the layouts oneDNN's convolutions choose (blocked channels), reordered
// from and to NCHW at the block's edges on every call.
//  - Inference: batch norm folded into the convolutions' weights and bias
//    (recomputed every call from the parameters), ReLU and the shortcut's
//    add fused into the convolutions as post-ops.
//  - Training step: batch statistics, the first ReLU fused into its batch
//    norm, the shortcut's add and ReLU in one binary primitive, loss =
//    mean(out), backward to every parameter, SGD on the parameters kept in
//    the convolutions' layouts.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln_bench {

/// The block's tensors on the host, in the user's layouts: x NCHW, w OIHW,
/// the batch norms' weight (g), bias (b), running mean (m) and variance (v)
/// [C].
struct ResnetBlockData {
  static constexpr int64_t kBatch = 16, kChannels = 64, kSide = 56;
  std::vector<float> x, w1, w2, g1, b1, m1, v1, g2, b2, m2, v2;
};

/// Gradients of a training step's loss, in the user's layouts.
struct ResnetBlockGrads {
  std::vector<float> w1, w2, g1, b1, g2, b2;
};

class OnednnResnetBlock {
 public:
  /// Primitives are built at first use: forward() and trainStep() throw
  /// dnnl::error (a std::exception) where oneDNN cannot build one.
  explicit OnednnResnetBlock(const ResnetBlockData& data, float lr = 1e-3f);
  ~OnednnResnetBlock();
  OnednnResnetBlock(const OnednnResnetBlock&) = delete;
  OnednnResnetBlock& operator=(const OnednnResnetBlock&) = delete;

  /// Inference forward; the NCHW output stays valid until the next call.
  const float* forward();
  /// One training step; returns its loss (before the update).
  float trainStep();
  /// The gradients of the last trainStep.
  ResnetBlockGrads lastGrads();

 private:
  struct Inference;
  struct Training;
  ResnetBlockData data_;
  float lr_;
  std::unique_ptr<Inference> inference_;
  std::unique_ptr<Training> training_;
};

}  // namespace kiln_bench
