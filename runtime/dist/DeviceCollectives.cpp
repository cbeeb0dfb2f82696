// The recorded collectives on CUDA tensors: through one NCCL communicator
// per device (NcclCommunicator.h), created over the world communicator when
// a device's first collective runs, enqueued on the device's stream.
#include <map>
#include <memory>
#include <mutex>

#include "kiln/error.h"
#include "runtime/dist/Collectives.h"
#include "runtime/dist/NcclCommunicator.h"

namespace kiln::dist::detail {

namespace {

std::mutex gMutex;
std::map<int, std::unique_ptr<NcclCommunicator>> gCommunicators;  ///< by CUDA device index

/// Every rank reaches its device's first collective at the same point of its
/// program (the agreement check before it says so), so the communicator's
/// collective creation happens there on every rank. A creation that failed
/// leaves no entry: the next collective tries again, and fails alike.
NcclCommunicator& communicatorFor(int cudaDevice) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gCommunicators.find(cudaDevice);
  if (it == gCommunicators.end())
    it = gCommunicators.emplace(cudaDevice, std::make_unique<NcclCommunicator>(world(), cudaDevice)).first;
  return *it->second;
}

/// Why the device's communicator was aborted; "" when it works or does not
/// exist yet.
std::string failureOf(int cudaDevice) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gCommunicators.find(cudaDevice);
  return it == gCommunicators.end() ? std::string() : it->second->failure();
}

}  // namespace

std::shared_future<void> startDeviceCollective(core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
                                               const Shape& outShape, const void* in, void* out, int cudaDevice,
                                               void* stream) {
  Communicator& w = world();
  const std::string what = describe(op, dtype, inShape, w.rank(), w.size());
  try {
    // An aborted communicator fails at once, before the agreement exchange
    // that the other ranks may never join.
    if (std::string why = failureOf(cudaDevice); !why.empty())
      throw Error("the NCCL communicator on cuda:" + std::to_string(cudaDevice) + " was aborted (" + why + ")");
    checkAgreement(w, op, attr, dtype, inShape);
    return communicatorFor(cudaDevice)
        .enqueue(op, attr, dtype, inShape.numel(), outShape.numel(), in, out, stream, what + " on cuda:" +
                                                                                        std::to_string(cudaDevice));
  } catch (const Error& e) {
    const std::string m = e.what();
    throw Error(m.rfind(what, 0) == 0 ? m : what + ": " + m);
  }
}

void releaseDeviceCommunicators() {
  std::lock_guard<std::mutex> lock(gMutex);
  gCommunicators.clear();
}

}  // namespace kiln::dist::detail
