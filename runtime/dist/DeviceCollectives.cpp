// The recorded collectives on CUDA tensors: through one NCCL communicator
// per device (NcclCommunicator.h), created over the world communicator when
// a device's first collective runs, enqueued on a communication stream of
// the device that waits for the compute stream's earlier work (an event), so
// that the compute stream's later work (the rest of backward) overlaps it.
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"
#include "runtime/dist/Collectives.h"
#include "runtime/dist/NcclCommunicator.h"

namespace kiln::dist::detail {

namespace {

/// A device's communicator, or why it could not be made (then every later
/// collective on that device fails at once, alike on every rank: its
/// creation failed on all of them together).
struct DeviceEntry {
  std::shared_ptr<hal::Stream> stream;  ///< the communication stream
  std::shared_ptr<NcclCommunicator> comm;
  std::string creationError;
};

std::mutex gMutex;
std::map<int, DeviceEntry> gDevices;  ///< by CUDA device index
/// Held from a collective's agreement check until NCCL has it: threads of
/// one process reach NCCL in the order their collectives were agreed on,
/// one at a time.
std::mutex gIssueMutex;

void releaseAtExit() { releaseDeviceCommunicators(); }

/// Every rank reaches its device's first collective at the same point of its
/// program (the agreement check before it says so), so the communicator's
/// collective creation happens there on every rank. Shared: finalize() may
/// release it while another thread's collective still holds it.
DeviceEntry communicatorFor(int cudaDevice) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gDevices.find(cudaDevice);
  if (it != gDevices.end()) {
    if (!it->second.comm) throw Error(it->second.creationError);
    return it->second;
  }
  DeviceEntry& entry = gDevices[cudaDevice];
  try {
    // The stream first: the communicator's set-up is collective, and
    // fails on every rank together.
    entry.stream = hal::deviceContext(Device::cuda(cudaDevice)).createStream();
    if (!entry.stream->nativeHandle()) throw Error("cuda:" + std::to_string(cudaDevice) + " gave no CUDA stream");
    entry.comm = std::make_shared<NcclCommunicator>(world(), cudaDevice);
  } catch (const std::exception& e) {
    entry.comm.reset();
    entry.creationError = e.what();
    throw Error(entry.creationError);
  }
  // NCCL's own CUDA runtime registered its exit handlers during the
  // creation: this one, registered after them, runs before them.
  static const bool registered = (std::atexit(releaseAtExit), true);
  (void)registered;
  return entry;
}

/// What is wrong with the device's communicator ("was aborted (why)");
/// "" when it works or does not exist yet.
std::string failureOf(int cudaDevice) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gDevices.find(cudaDevice);
  if (it == gDevices.end()) return {};
  if (!it->second.comm) return "could not be created (" + it->second.creationError + ")";
  const std::string why = it->second.comm->failure();
  return why.empty() ? why : "was aborted (" + why + ")";
}

}  // namespace

std::shared_future<void> startDeviceCollective(core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
                                               const Shape& outShape, const void* in, void* out, int cudaDevice,
                                               hal::Stream& compute, std::vector<std::shared_ptr<void>> keepAlive) {
  Communicator& w = world();
  const std::string what = describe(op, dtype, inShape, w.rank(), w.size());
  try {
    std::lock_guard<std::mutex> issuing(gIssueMutex);
    // A failed communicator fails at once, before the agreement exchange
    // that the other ranks may never join (after a failed collective the
    // process should exit; mpirun then ends the job).
    if (std::string why = failureOf(cudaDevice); !why.empty())
      throw Error("the NCCL communicator on cuda:" + std::to_string(cudaDevice) + " " + why);
    checkAgreement(w, op, attr, dtype, inShape, Device::CUDA);
    const DeviceEntry entry = communicatorFor(cudaDevice);
    // The input is written and the output block's earlier users are done
    // once the compute stream's work so far is.
    std::unique_ptr<hal::Event> ready = compute.createEvent();
    ready->record(compute);
    entry.stream->wait(*ready);
    keepAlive.push_back(entry.stream);  // the stream outlives its work
    return entry.comm->enqueue(op, attr, dtype, inShape.numel(), outShape.numel(), in, out,
                               entry.stream->nativeHandle(), what + " on cuda:" + std::to_string(cudaDevice),
                               std::move(keepAlive));
  } catch (const Error& e) {
    const std::string m = e.what();
    throw Error(m.rfind(what, 0) == 0 ? m : what + ": " + m);
  }
}

void releaseDeviceCommunicators() {
  std::map<int, DeviceEntry> devices;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    devices.swap(gDevices);
  }
  devices.clear();  // outside the lock: destruction waits for collectives in flight
}

}  // namespace kiln::dist::detail
