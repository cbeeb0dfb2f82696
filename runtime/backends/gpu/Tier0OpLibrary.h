// Tier0OpLibrary: the tier-0 op library shared by the GPU backends (CUDA,
// Level Zero). Elementwise ops, casts, copies, fills, arange, rand/randn,
// sum/prod/max/min reductions, argmax/argmin, index_select, gather,
// index_add and scatter_add (a copy, then one launch: a thread per position
// of each distinct target row, over that row's source rows in index order;
// halves add through f32), cumsum (the same copy, then one launch whose
// positions walk the axis in order),
// matmul (one dot product per output element) and conv2d (padding and
// im2col copies, then a batched matmul) become launches of the tier-0
// kernels (Tier0Kernels.h): this class collapses axes, picks the kernel and
// packs its 8-byte parameters; a backend only dispatches (loads the
// kernel's module on first use and enqueues it on its stream).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "runtime/backends/gpu/Tier0Kernels.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::hal {

class Tier0OpLibrary : public interp::OpLibrary {
 public:
  bool synchronous() const override { return false; }
  void unary(core::OpKind op, const interp::Arg& in, char* out) override;
  void binary(core::OpKind op, const interp::Arg& a, const interp::Arg& b, const Shape& shape, char* out) override;
  void compare(core::OpKind op, const interp::Arg& a, const interp::Arg& b, const Shape& shape, char* out) override;
  void where(const interp::Arg& cond, const interp::Arg& a, const interp::Arg& b, const Shape& shape,
             char* out) override;
  void cast(const interp::Arg& in, DType to, char* out) override;
  void copy(const interp::Arg& in, char* out) override;
  void copyInto(const interp::Arg& in, char* out, const int64_t* outStrides) override;
  void reduce(core::OpKind op, const interp::Arg& in, core::AxisMask mask, char* out) override;
  void argReduce(core::OpKind op, const interp::Arg& in, int axis, bool selectLast, char* out) override;
  void matmul(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) override;
  void conv2d(const interp::Arg& x, const interp::Arg& w, const core::Conv2dParams& p, const Shape& outShape,
              char* out) override;
  void indexSelect(const interp::Arg& x, int axis, const interp::Arg& index, const Shape& outShape,
                   char* out) override;
  void gather(const interp::Arg& x, int axis, const interp::Arg& index, char* out) override;
  void indexAdd(const interp::Arg& x, int axis, std::vector<int64_t> index, const interp::Arg& source,
                char* out) override;
  void full(DType t, int64_t n, double f, int64_t i, char* out) override;
  void arange(DType t, int64_t n, double start, double step, char* out) override;
  void random(core::OpKind op, DType t, int64_t n, uint64_t seed, char* out) override;

 protected:
  explicit Tier0OpLibrary(Device device);
  /// Enqueues kernel `entry` on the device's default stream with the
  /// parameters `params` (Tier0Kernels.h: all 8 bytes) over `workItems`
  /// grid-stride work items (> 0); throws kiln::Error naming the device
  /// and the kernel when the driver refuses.
  virtual void dispatch(const std::string& entry, const std::vector<uint64_t>& params, int64_t workItems) = 0;
  /// "CUDA", "Level Zero": for messages.
  virtual const char* backendName() const = 0;
  /// Does the backend have the WarpReduce kernels (Tier0Kernels.h: 32-lane
  /// warps, so CUDA)?
  virtual bool hasWarpReductions() const { return false; }

  Device device_;

 private:
  /// One strided operand over the launch's index space.
  struct Operand {
    const char* data;
    const int64_t* strides;  ///< element strides, one per axis of the shape
  };
  /// Launches the kernel `spec` (its layout chosen here) over `shape`;
  /// `outStrides` null means a dense output.
  void launch(tier0::KernelSpec spec, const Shape& shape, char* out, const int64_t* outStrides,
              std::initializer_list<Operand> inputs);
  /// Launches a leaf kernel (Fill, Arange, Random) over n dense elements.
  void launchLeaf(const tier0::KernelSpec& spec, int64_t n, std::initializer_list<uint64_t> extra, char* out);
  /// index_select and gather (Tier0Kernels.h, Family::Take).
  void launchTake(const interp::Arg& x, const interp::Arg& index, const Shape& outShape, const int64_t* xStrides,
                  const int64_t* indexStrides, int64_t axisStride, char* out);
  /// index_add's additions into `out` (dense, of `shape`, holding x) from
  /// `source`, with device-resident `index` values: `groups` > 0, the table
  /// of IndexAddRows (Tier0Kernels.h) with that many target rows; 0, the
  /// `count` index values themselves, walked in order (Family::IndexAdd).
  void launchIndexAdd(const Shape& shape, int axis, const int64_t* outStrides, char* out, const interp::Arg& source,
                      const char* index, int64_t count, int64_t groups);
};

}  // namespace kiln::hal
