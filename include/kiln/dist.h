// Distributed training: processes launched by `mpirun`, a communicator
// between them, collectives recorded into traces, and data-parallel
// gradients.
//
//   kiln::dist::init();                       // rank and size from mpirun
//   Tensor s = kiln::dist::all_reduce(x);     // a node in the trace
//   kiln::dist::DataParallel dp({&w, &b});    // parameters from rank 0
//   opt.step(dp.gradients(loss));             // gradients averaged over ranks
//
// Collectives are recorded like any op (they are nodes of the trace, in the
// trace key); the interpreter runs them through the world communicator, and
// a trace that contains them tiers up as compiled regions around them
// (Regions.h): the engine calls the communicator between its kernels. Every
// rank must record the same collectives in the same order with the same
// dtypes and shapes; a mismatch is a kiln::Error on every rank that names
// both sides. A collective that does not complete within KILN_DIST_TIMEOUT
// seconds (a rank died, hangs or took another path) fails with a
// kiln::Error; the communicator is unusable afterwards (the process should
// exit; mpirun then ends the job).
//
// Backends: MPI (Open MPI) when the process was started by mpirun, a
// single-process communicator (rank 0 of 1) otherwise, so a script runs
// unchanged without a launcher. Collectives take CPU tensors (through the
// world communicator) or CUDA tensors: those go through one NCCL
// communicator per device (nccl_communicator below, bootstrapped over the
// world when the device's first collective runs), each on a communication
// stream of the device once the work queued before it is done, so that the
// work recorded after it (the rest of backward) runs beside it; with one
// rank they are copies on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln::dist {

enum class ReduceOp : int64_t { sum = 0, mean = 1, max = 2 };
const char* reduce_op_name(ReduceOp op);

/// A group of processes and the collectives between them on host buffers
/// (dense, `count` elements of `dtype`). Every call blocks until the
/// collective completes on this rank, at most KILN_DIST_TIMEOUT seconds;
/// errors are kiln::Error. The recorded ops below call these; programs use
/// the ops.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "single-process".
  virtual std::string backend() const = 0;

  /// out = op over the ranks' `in` (mean: floating dtypes only).
  virtual void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) = 0;
  /// `buf` of rank `root` to every rank's `buf`.
  virtual void broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  /// out = the ranks' `in` (count each) one after another, in rank order.
  virtual void all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  /// out = part `rank` (count elements) of the reduction of the ranks' `in`
  /// (count * size elements each).
  virtual void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) = 0;
  /// Every rank's `bytes` bytes of `in`, in rank order (small agreements).
  virtual void all_gather_bytes(const void* in, void* out, std::size_t bytes) = 0;
  virtual void barrier() = 0;
};

/// Sets up the world communicator once (later calls do nothing): MPI when
/// the process was launched by mpirun (Open MPI's or PMIx's environment),
/// else the single-process one. Throws kiln::Error when launched by mpirun
/// but Kiln was built without MPI. Kiln initializes MPI itself on its
/// communication thread, unless the application already has (then with at
/// least MPI_THREAD_SERIALIZED, and it finalizes MPI itself).
void init();
bool initialized();
/// The world communicator; throws kiln::Error before init().
Communicator& world();
int rank();
int size();
/// This rank's index among the ranks on its machine (0 .. ranks there - 1),
/// from the ranks' host names (a collective the first time, then cached):
/// the GPU a rank should use, cuda:local_rank(), as NCCL wants one per rank.
int local_rank();
/// Shuts the communicator down (MPI_Finalize). Called at exit if not
/// before; skipped after a timed-out collective (it could not complete).
void finalize();

/// NCCL between NVIDIA GPUs: a communicator over the ranks of `bootstrap`
/// (normally world()), whose collectives take CUDA device pointers on device
/// `cuda_device`; rank 0's NCCL id and the small agreement exchanges go
/// through `bootstrap`, which must outlive it. libnccl.so.2 and libcuda.so.1
/// are opened at run time (KILN_NCCL_LIBRARY, KILN_CUDA_LIBRARY); a missing
/// one is a kiln::Error. Its calls run on a stream of its own and block like
/// the other backends' (the recorded collectives on CUDA tensors use a
/// communicator of their own, on a communication stream of the device). A
/// collective not done within KILN_DIST_TIMEOUT of its enqueue (so one queued
/// behind long device work counts that work too), or an NCCL error, aborts
/// it (ncclCommAbort; a thread blocked inside a blocking NCCL call, e.g.
/// connecting to a dead peer, is not freed by it: the communicator is not
/// non-blocking yet); its creation (ncclCommInitRank, which waits for every
/// rank) fails after KILN_DIST_TIMEOUT too. NCCL wants each rank on a GPU of
/// its own: cuda:local_rank(). Readers of a collective's result wait on the
/// host until the device has run it. Tested between processes on a fake
/// NCCL; not yet run on GPUs.
std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap, int cuda_device = 0);

/// Sum, mean or max of `x` over the ranks (same dtype and shape on every
/// rank; mean needs a floating dtype). Not differentiated: the result
/// carries no gradient.
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::sum);
/// Rank `root`'s `x` on every rank (same dtype and shape on every rank).
Tensor broadcast(const Tensor& x, int root = 0);
/// The ranks' `x` concatenated along axis 0, in rank order: [size * d0, ...].
Tensor all_gather(const Tensor& x);
/// The reduction of the ranks' `x`, split along axis 0 into size() parts;
/// this rank's part: [d0 / size, ...] (d0 must be a multiple of size()).
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::sum);

struct DataParallelOptions {
  /// Gradients are flattened into buckets of about this many bytes, one
  /// all_reduce each, in the order backward produces them (last parameter
  /// first).
  std::size_t bucket_bytes = std::size_t{1} << 20;
};

/// Data-parallel training: each rank runs the same program on its shard of
/// the data; gradients are averaged over the ranks, so the parameters stay
/// identical. The optimizer is unchanged:
///
///   DataParallel dp({&w1, &b1, &w2, &b2});   // parameters from rank 0
///   opt.step(dp.gradients(loss));
class DataParallel {
 public:
  /// Replaces each parameter by rank 0's value (a broadcast) and keeps the
  /// handles; they must outlive this object.
  explicit DataParallel(std::vector<Tensor*> params, DataParallelOptions options = {});
  /// grad(loss, params), each averaged over the ranks: recorded into the
  /// same trace, one all_reduce per bucket.
  std::vector<Tensor> gradients(const Tensor& loss);
  /// The buckets of the last gradients() call: parameter indices each.
  const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  /// True when every rank's parameters are bit-identical to rank 0's
  /// (flushes; a collective).
  bool parameters_identical() const;

 private:
  std::vector<Tensor*> params_;
  DataParallelOptions options_;
  std::vector<std::vector<std::size_t>> buckets_;
};

}  // namespace kiln::dist
