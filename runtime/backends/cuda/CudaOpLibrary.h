// CudaOpLibrary: the tier-0 op library of one CUDA device. Elementwise ops,
// casts, copies, fills, arange, rand/randn, sum/prod/max/min reductions,
// argmax/argmin, index_select, gather and matmul (one dot product per output
// element, until cuBLASLt) launch the embedded tier-0 kernels
// (Tier0Kernels.h, KernelImages.h) on the device's default stream; each PTX
// module is loaded into the device's context on its first launch. Ops
// without a CUDA kernel yet (conv2d) throw kiln::Error naming the op and the way around it.
#pragma once

#include <cuda.h>

#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/cuda/Tier0Kernels.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;

class CudaOpLibrary final : public interp::OpLibrary {
 public:
  CudaOpLibrary(CudaDeviceHandle& device, CudaStream& stream, int smVersion);
  ~CudaOpLibrary() override;

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
  void full(DType t, int64_t n, double f, int64_t i, char* out) override;
  void arange(DType t, int64_t n, double start, double step, char* out) override;
  void random(core::OpKind op, DType t, int64_t n, uint64_t seed, char* out) override;

  /// The SM version whose embedded PTX this device loads (0: none fits).
  int imageSmVersion() const { return imageSm_; }

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
  CUfunction function(const std::string& entry);
  [[noreturn]] void notYet(const char* op) const;

  CudaDeviceHandle& device_;
  CudaStream& stream_;
  int imageSm_ = 0;
  std::mutex mutex_;
  std::unordered_map<std::string, CUfunction> functions_;
  std::vector<CUmodule> modules_;
};

}  // namespace kiln::hal::cuda
