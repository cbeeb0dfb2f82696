// The runtime side of the collective ops (include/kiln/op_table.def,
// category Collective): the interpreter starts each node with
// startCollective, between the compiled regions of a trace (exec/Regions.h),
// and waits for it where its result is first read, so the collective
// overlaps with the work recorded after it that does not need it. Backends
// (MpiCommunicator.cpp, the single-process one in Communicator.cpp) are
// created by init() (include/kiln/dist.h); collectives on CUDA tensors go
// through NCCL instead (startDeviceCollective, DeviceCollectives.cpp).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dist.h"
#include "kiln/shape.h"
#include "runtime/core/OpKind.h"

namespace kiln::hal {
class Stream;
}  // namespace kiln::hal

namespace kiln::dist::detail {

/// Starts one collective node on the world communicator's communication
/// thread, after those started before it, on dense host buffers: `in` holds
/// `inShape`, `out` receives `outShape`; `keepAlive` holds their storage
/// until it is done. It first checks that every rank runs the same
/// collective on the same dtype and shape (a kiln::Error naming both sides
/// otherwise). The future completes with the collective (or its error).
std::shared_future<void> startCollective(core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
                                         const Shape& outShape, const void* in, void* out,
                                         std::vector<std::shared_ptr<void>> keepAlive);

/// The same on dense buffers of CUDA device `cudaDevice`, through that
/// device's NCCL communicator (created over the world when the device's
/// first collective runs), on a communication stream of the device that
/// first waits for the work already enqueued on `compute` (the device's
/// stream): later work on `compute` runs while the collective waits for the
/// other ranks. The agreement check runs first, on the calling thread. The
/// future completes when the device has run the collective (or fails: NCCL
/// error, KILN_DIST_TIMEOUT); `keepAlive` is held until then.
std::shared_future<void> startDeviceCollective(core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
                                               const Shape& outShape, const void* in, void* out, int cudaDevice,
                                               hal::Stream& compute, std::vector<std::shared_ptr<void>> keepAlive);

/// Destroys the devices' NCCL communicators (finalize(), before the world
/// they were bootstrapped over).
void releaseDeviceCommunicators();

/// Exchanges (op, dtype, shape, attr, device kind) with every rank; throws
/// kiln::Error naming this rank's and the first differing rank's when they
/// disagree. The device kind says which path the tensors take (host memory
/// through the world, CUDA through NCCL); its index may differ per rank.
void checkAgreement(Communicator& comm, core::OpKind op, int64_t attr, DType dtype, const Shape& shape,
                    Device::Kind device = Device::CPU);

/// Was this process started by mpirun (Open MPI or PMIx environment)?
bool launchedByMpi();

/// The MPI backend; null when Kiln was built without MPI.
std::unique_ptr<Communicator> createMpiCommunicator();

/// "dist::all_reduce (f32 [4, 3], rank 1 of 2)" for messages.
std::string describe(core::OpKind op, DType dtype, const Shape& shape, int rank, int size);

/// Element-wise out /= size for a mean (floating dtypes, including f16/bf16).
void divideBySize(void* data, int64_t count, DType dtype, int size);

}  // namespace kiln::dist::detail
