// The NCCL backend: collectives between NVIDIA GPUs on CUDA device buffers,
// enqueued on a CUDA stream like kernels. The recorded collectives on CUDA
// tensors use one per device (DeviceCollectives.cpp), enqueued on a
// communication stream of the device; kiln::dist::nccl_communicator() gives
// one with a stream of its own, whose calls block like the other backends'.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dist.h"
#include "runtime/core/OpKind.h"

namespace kiln::dist::detail {

/// One NCCL communicator on one CUDA device over the ranks of `bootstrap`
/// (the world): rank 0's ncclUniqueId reaches the others through it, and the
/// small host exchanges (all_gather_bytes, barrier) go through it.
/// libnccl.so.2 and libcuda.so.1 are opened at run time (KILN_NCCL_LIBRARY,
/// KILN_CUDA_LIBRARY), so one build runs everywhere; a missing one is a
/// kiln::Error.
///
/// A watchdog thread fails every collective still running KILN_DIST_TIMEOUT
/// seconds after it was enqueued, or when NCCL reports an asynchronous error:
/// it aborts the communicator (ncclCommAbort, which also ends the device's
/// wait), and every later call fails at once.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int cudaDevice);
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "nccl"; }

  /// Enqueues collective `op` (attr: the ReduceOp, or broadcast's root) from
  /// `in` (inCount elements) to `out` (outCount) on `stream`, a CUstream of
  /// this device's primary context: it runs after the work enqueued there
  /// before it, and the work enqueued after it waits for it. The future
  /// completes when the device has run it, or fails with a kiln::Error that
  /// starts with `what` (timeout, NCCL error). `keepAlive` is held until the
  /// device is done with the buffers (also after a failure). Throws at once
  /// when NCCL refuses the call or the communicator was aborted.
  std::shared_future<void> enqueue(core::OpKind op, int64_t attr, DType dtype, int64_t inCount, int64_t outCount,
                                   const void* in, void* out, void* stream, const std::string& what,
                                   std::vector<std::shared_ptr<void>> keepAlive = {});

  /// Why the watchdog aborted it ("" while it works).
  std::string failure() const;

  // The blocking calls: on this communicator's own stream, waited for.
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root) override;
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  /// Host bytes: through the bootstrap communicator.
  void all_gather_bytes(const void* in, void* out, std::size_t bytes) override;
  void barrier() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::dist::detail
