// The NCCL backend: collectives between NVIDIA GPUs on CUDA device buffers.
// libnccl.so.2 and libcuda.so.1 are opened at run time (KILN_NCCL_LIBRARY,
// KILN_CUDA_LIBRARY override the paths), so one build runs everywhere and a
// machine without them gets a clear kiln::Error. The ranks are those of a
// bootstrap communicator (the world, over MPI): rank 0's ncclUniqueId
// reaches the others through it, and the small agreement exchanges and
// barriers go through it too. Each collective is enqueued on this
// communicator's stream and polled (cuStreamQuery, ncclCommGetAsyncError)
// until it completes or KILN_DIST_TIMEOUT passes; then the communicator is
// aborted (ncclCommAbort) and the call fails.
//
// Not yet exercised on a GPU (the machines this was written on have none),
// and no recorded op reaches it yet: the recorded collectives
// (CollectiveOps.cpp) take CPU tensors and refuse CUDA ones, which are to
// be routed here.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/dist/Collectives.h"

namespace kiln::dist {

namespace {

// The few NCCL and CUDA driver declarations used (their C ABIs).
struct NcclUniqueId {
  char internal[128];
};
using NcclComm = void*;
using CuStream = void*;
using CuContext = void*;
using CuResult = int;
using NcclResult = int;
constexpr int kNcclSuccess = 0, kNcclInProgress = 7;
constexpr int kCudaSuccess = 0, kCudaNotReady = 600;
enum NcclOp { kNcclSum = 0, kNcclMax = 2, kNcclAvg = 4 };

struct NcclApi {
  NcclResult (*getUniqueId)(NcclUniqueId*);
  NcclResult (*commInitRank)(NcclComm*, int, NcclUniqueId, int);
  NcclResult (*commDestroy)(NcclComm);
  NcclResult (*commAbort)(NcclComm);
  NcclResult (*commGetAsyncError)(NcclComm, NcclResult*);
  const char* (*getErrorString)(NcclResult);
  NcclResult (*allReduce)(const void*, void*, size_t, int, int, NcclComm, CuStream);
  NcclResult (*broadcast)(const void*, void*, size_t, int, int, NcclComm, CuStream);
  NcclResult (*allGather)(const void*, void*, size_t, int, NcclComm, CuStream);
  NcclResult (*reduceScatter)(const void*, void*, size_t, int, int, NcclComm, CuStream);
  CuResult (*cuInit)(unsigned);
  CuResult (*cuDeviceGet)(int*, int);
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext*, int);
  CuResult (*cuDevicePrimaryCtxRelease)(int);
  CuResult (*cuCtxSetCurrent)(CuContext);
  CuResult (*cuStreamCreate)(CuStream*, unsigned);
  CuResult (*cuStreamDestroy)(CuStream);
  CuResult (*cuStreamQuery)(CuStream);
};

void* openLibrary(const char* env, const char* name) {
  const char* path = std::getenv(env);
  void* h = dlopen(path && *path ? path : name, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error(std::string("dist::nccl_communicator: cannot open ") + (path && *path ? path : name) + " (" +
                dlerror() + "); install NCCL and the NVIDIA driver, or set " + env + " to the library's path");
  return h;
}

template <class F>
void bind(void* lib, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(lib, symbol));
  if (!out) throw Error(std::string("dist::nccl_communicator: ") + symbol + " is missing from the library");
}

int ncclType(DType t) {
  switch (t) {
    case DType::i8: return 0;
    case DType::u8:
    case DType::boolean: return 1;
    case DType::i32: return 2;
    case DType::i64: return 4;
    case DType::f16: return 6;
    case DType::f32: return 7;
    case DType::f64: return 8;
    case DType::bf16: return 9;
  }
  return 7;
}

int ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return kNcclSum;
    case ReduceOp::mean: return kNcclAvg;
    case ReduceOp::max: return kNcclMax;
  }
  return kNcclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : bootstrap_(bootstrap), device_(device) {
    nccl_ = openLibrary("KILN_NCCL_LIBRARY", "libnccl.so.2");
    cuda_ = openLibrary("KILN_CUDA_LIBRARY", "libcuda.so.1");
    bind(nccl_, "ncclGetUniqueId", api_.getUniqueId);
    bind(nccl_, "ncclCommInitRank", api_.commInitRank);
    bind(nccl_, "ncclCommDestroy", api_.commDestroy);
    bind(nccl_, "ncclCommAbort", api_.commAbort);
    bind(nccl_, "ncclCommGetAsyncError", api_.commGetAsyncError);
    bind(nccl_, "ncclGetErrorString", api_.getErrorString);
    bind(nccl_, "ncclAllReduce", api_.allReduce);
    bind(nccl_, "ncclBroadcast", api_.broadcast);
    bind(nccl_, "ncclAllGather", api_.allGather);
    bind(nccl_, "ncclReduceScatter", api_.reduceScatter);
    bind(cuda_, "cuInit", api_.cuInit);
    bind(cuda_, "cuDeviceGet", api_.cuDeviceGet);
    bind(cuda_, "cuDevicePrimaryCtxRetain", api_.cuDevicePrimaryCtxRetain);
    bind(cuda_, "cuDevicePrimaryCtxRelease_v2", api_.cuDevicePrimaryCtxRelease);
    bind(cuda_, "cuCtxSetCurrent", api_.cuCtxSetCurrent);
    bind(cuda_, "cuStreamCreate", api_.cuStreamCreate);
    bind(cuda_, "cuStreamDestroy_v2", api_.cuStreamDestroy);
    bind(cuda_, "cuStreamQuery", api_.cuStreamQuery);
    cuda("cuInit", api_.cuInit(0));
    cuda("cuDeviceGet", api_.cuDeviceGet(&cuDevice_, device_));
    cuda("cuDevicePrimaryCtxRetain", api_.cuDevicePrimaryCtxRetain(&context_, cuDevice_));
    cuda("cuCtxSetCurrent", api_.cuCtxSetCurrent(context_));
    cuda("cuStreamCreate", api_.cuStreamCreate(&stream_, 0));
    // Rank 0's unique id, to every rank through the bootstrap communicator.
    NcclUniqueId id{};
    if (bootstrap_.rank() == 0) check("ncclGetUniqueId", api_.getUniqueId(&id));
    bootstrap_.broadcast(&id, sizeof(id), DType::u8, 0);
    check("ncclCommInitRank", api_.commInitRank(&comm_, bootstrap_.size(), id, bootstrap_.rank()));
  }

  ~NcclCommunicator() override {
    if (comm_) (broken_ ? api_.commAbort : api_.commDestroy)(comm_);
    if (stream_) api_.cuStreamDestroy(stream_);
    if (context_) api_.cuDevicePrimaryCtxRelease(cuDevice_);
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  std::string backend() const override { return "nccl"; }

  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    run("all_reduce", api_.allReduce(in, out, static_cast<size_t>(count), ncclType(dtype), ncclOp(op), comm_, stream_));
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    run("broadcast", api_.broadcast(buf, buf, static_cast<size_t>(count), ncclType(dtype), root, comm_, stream_));
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    run("all_gather", api_.allGather(in, out, static_cast<size_t>(count), ncclType(dtype), comm_, stream_));
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    run("reduce_scatter",
        api_.reduceScatter(in, out, static_cast<size_t>(count), ncclType(dtype), ncclOp(op), comm_, stream_));
  }
  /// Host bytes: through the bootstrap communicator.
  void all_gather_bytes(const void* in, void* out, std::size_t bytes) override {
    bootstrap_.all_gather_bytes(in, out, bytes);
  }
  void barrier() override { bootstrap_.barrier(); }

 private:
  void cuda(const char* what, CuResult r) {
    if (r != kCudaSuccess)
      throw Error(std::string("dist::nccl_communicator: ") + what + " failed (CUDA error " + std::to_string(r) +
                  ") on device " + std::to_string(device_));
  }
  void check(const char* what, NcclResult r) {
    if (r != kNcclSuccess && r != kNcclInProgress)
      throw Error(std::string("dist::nccl ") + what + ": " + api_.getErrorString(r));
  }
  /// Waits for the collective just enqueued, at most KILN_DIST_TIMEOUT.
  void run(const char* what, NcclResult enqueued) {
    if (broken_) throw Error(std::string("dist::") + what + ": the NCCL communicator was aborted after a failure");
    check(what, enqueued);
    const int64_t timeout = settings().dist_timeout_s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    for (;;) {
      const CuResult q = api_.cuStreamQuery(stream_);
      if (q == kCudaSuccess) return;
      NcclResult async = kNcclSuccess;
      api_.commGetAsyncError(comm_, &async);
      if ((q != kCudaNotReady || (async != kNcclSuccess && async != kNcclInProgress)) ||
          std::chrono::steady_clock::now() > deadline) {
        broken_ = true;
        throw Error(std::string("dist::") + what + " (nccl, rank " + std::to_string(rank()) + " of " +
                    std::to_string(size()) + "): " +
                    (q != kCudaNotReady ? "CUDA error " + std::to_string(q)
                     : async != kNcclSuccess && async != kNcclInProgress
                         ? std::string(api_.getErrorString(async))
                         : "not complete after KILN_DIST_TIMEOUT=" + std::to_string(timeout) +
                               " s: another rank died, hangs, or did not call the same collective") +
                    "; the communicator is aborted");
      }
      std::this_thread::yield();
    }
  }

  Communicator& bootstrap_;
  int device_;
  int cuDevice_ = 0;
  void* nccl_ = nullptr;
  void* cuda_ = nullptr;
  NcclApi api_{};
  CuContext context_ = nullptr;
  CuStream stream_ = nullptr;
  NcclComm comm_ = nullptr;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap, int cuda_device) {
  return std::make_unique<NcclCommunicator>(bootstrap, cuda_device);
}

}  // namespace kiln::dist
