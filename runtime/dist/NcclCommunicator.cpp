// The NCCL backend (NcclCommunicator.h). Each collective is enqueued on a
// stream, followed by a host function (cuLaunchHostFunc) that completes its
// future when the device gets there; a watchdog thread checks the
// collectives still in flight for NCCL's asynchronous errors and for
// KILN_DIST_TIMEOUT, as PyTorch's ProcessGroupNCCL does: a rank that dies or
// hangs leaves the others' NCCL kernels waiting on the device, and only
// ncclCommAbort ends that wait.
#include "runtime/dist/NcclCommunicator.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/support/Log.h"

namespace kiln::dist {
namespace detail {

using exec::log;

namespace {

// The few NCCL and CUDA driver declarations used (their C ABIs, nccl.h and
// cuda.h; test/cuda_driver/FakeNccl.cpp is compiled against the real nccl.h).
struct NcclUniqueId {
  char internal[128];
};
using NcclComm = void*;
using CuStream = void*;
using CuContext = void*;
using CuResult = int;
using NcclResult = int;
using CuHostFn = void (*)(void*);
constexpr int kNcclSuccess = 0, kNcclInProgress = 7;
constexpr int kCudaSuccess = 0;
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
  CuResult (*cuStreamSynchronize)(CuStream);
  CuResult (*cuLaunchHostFunc)(CuStream, CuHostFn, void*);
};

/// `configured` (from `variable`), else `name`, opened; a kiln::Error
/// naming both when it is not there.
void* openLibrary(const std::string& configured, const char* name, const char* variable) {
  const std::string path = configured.empty() ? name : configured;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error("dist::nccl_communicator: cannot open " + path + " (" + dlerror() +
                "); install NCCL and the NVIDIA driver, or set " + variable + " to the library's path");
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

/// One enqueued collective: settled once, by its host function (done) or by
/// the watchdog (failed), whichever comes first.
struct Inflight {
  std::string what;
  std::chrono::steady_clock::time_point deadline;
  std::promise<void> promise;
  std::atomic<bool> settled{false};
  /// Its host function ran: the device is done with its buffers.
  std::atomic<bool> deviceDone{false};
  /// The buffers' owners: released by the watchdog once deviceDone (not in
  /// the host function, where no CUDA call is allowed, frees included).
  std::vector<std::shared_ptr<void>> keepAlive;

  void settle(std::exception_ptr failure) {
    if (settled.exchange(true)) return;
    if (failure) promise.set_exception(failure);
    else promise.set_value();
  }
};

/// Runs on the stream's host-function thread: no CUDA call allowed there.
void completed(void* p) {
  std::unique_ptr<std::shared_ptr<Inflight>> held(static_cast<std::shared_ptr<Inflight>*>(p));
  (*held)->deviceDone = true;
  (*held)->settle(nullptr);
}

/// How often the watchdog looks at NCCL's asynchronous error and the
/// deadlines while collectives are in flight (their completion does not wait
/// for it).
constexpr auto kWatchdogPoll = std::chrono::milliseconds(10);

}  // namespace

struct NcclCommunicator::State {
  Communicator& bootstrap;
  int device;
  int cuDevice = 0;
  void* nccl = nullptr;
  void* cuda = nullptr;
  NcclApi api{};
  CuContext context = nullptr;
  CuStream ownStream = nullptr;

  /// One thread inside NCCL on this communicator at a time (NCCL's rule),
  /// the watchdog's abort included: taken before `mutex`, never under it.
  std::mutex callMutex;
  std::mutex mutex;  // guards comm, broken, inflight, draining, stop
  std::condition_variable wake;
  NcclComm comm = nullptr;
  std::string broken;  ///< why the communicator was aborted ("" while it works)
  std::deque<std::shared_ptr<Inflight>> inflight;
  /// Failed by an abort, their device work not yet ended: their buffers stay.
  std::deque<std::shared_ptr<Inflight>> draining;
  bool stop = false;
  std::thread watchdog;

  State(Communicator& b, int d) : bootstrap(b), device(d) {}
  /// Also after a constructor that failed half-way.
  ~State() {
    if (watchdog.joinable()) {
      std::unique_lock<std::mutex> lock(mutex);
      // What is in flight completes, or the watchdog aborts it at its
      // deadline (destroying a communicator under a hung collective would
      // wait for it without end); aborted work ends on the device soon
      // after, or is given up on after another timeout.
      const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(2 * settings().dist_timeout_s);
      while ((!inflight.empty() || !draining.empty()) && std::chrono::steady_clock::now() < giveUp)
        wake.wait_for(lock, kWatchdogPoll);
      const bool gaveUp = !inflight.empty() || !draining.empty();
      if (gaveUp) {
        // Their buffers are left to the device (leaked): freeing them would
        // hand memory it may still write to someone else.
        auto* leaked = new std::vector<std::shared_ptr<Inflight>>(inflight.begin(), inflight.end());
        leaked->insert(leaked->end(), draining.begin(), draining.end());
        log().error("dist: NCCL on cuda:{}: {} collective(s) never ended on the device; their buffers are leaked",
                    device, leaked->size());
      }
      stop = true;
      lock.unlock();
      wake.notify_all();
      watchdog.join();
      if (gaveUp) ownStream = nullptr;  // its synchronize could wait without end too
    }
    if (context) api.cuCtxSetCurrent(context);
    if (ownStream) api.cuStreamSynchronize(ownStream);
    if (comm) api.commDestroy(comm);
    if (ownStream) api.cuStreamDestroy(ownStream);
    if (context) api.cuDevicePrimaryCtxRelease(cuDevice);
  }

  void cudaCheck(const char* what, CuResult r) const {
    if (r != kCudaSuccess)
      throw Error(std::string("dist::nccl_communicator: ") + what + " failed (CUDA error " + std::to_string(r) +
                  ") on device cuda:" + std::to_string(device));
  }
  std::string ncclError(NcclResult r) const { return std::string("NCCL: ") + api.getErrorString(r); }
  static bool failed(NcclResult r) { return r != kNcclSuccess && r != kNcclInProgress; }

  /// Aborts the communicator and fails what is in flight. Called with
  /// `lock` held; ncclCommAbort runs after it is released, once no other
  /// thread is inside NCCL on it (callMutex): the futures fail at once even
  /// when an enqueue is blocked inside a blocking NCCL call, which the abort
  /// then cannot end (non-blocking communicators could; not used yet).
  void abort(std::unique_lock<std::mutex>& lock, const std::string& why, bool holdsCallMutex = false) {
    if (!broken.empty()) return;
    broken = why;
    NcclComm doomed = std::exchange(comm, nullptr);
    std::deque<std::shared_ptr<Inflight>> failing = std::move(inflight);
    inflight.clear();
    for (const auto& f : failing) draining.push_back(f);
    lock.unlock();
    // Failed before the abort ends their device work: its host functions
    // then find them settled.
    for (const auto& f : failing)
      f->settle(std::make_exception_ptr(Error(f->what + ": " + why + "; the NCCL communicator is aborted")));
    if (doomed) {
      std::unique_lock<std::mutex> calls(callMutex, std::defer_lock);
      if (!holdsCallMutex) calls.lock();
      api.commAbort(doomed);
    }
    log().error("dist: NCCL on cuda:{}: {}; the communicator is aborted", device, why);
    lock.lock();
  }

  /// Drops the collectives the device is done with, and their buffers
  /// (released with the lock dropped: a free may enter the driver).
  void prune(std::unique_lock<std::mutex>& lock) {
    std::vector<std::shared_ptr<Inflight>> done;
    for (auto* list : {&inflight, &draining})
      std::erase_if(*list, [&](const auto& f) {
        if (!f->deviceDone.load()) return false;
        done.push_back(f);
        return true;
      });
    if (done.empty()) return;
    lock.unlock();
    for (const auto& f : done) f->keepAlive.clear();
    done.clear();
    lock.lock();
    wake.notify_all();  // a destructor may be waiting for them
  }

  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      prune(lock);
      if (stop) return;
      if (inflight.empty() && draining.empty()) {
        wake.wait(lock, [&] { return stop || !inflight.empty() || !draining.empty(); });
        continue;
      }
      wake.wait_for(lock, kWatchdogPoll);
      prune(lock);
      if (stop) return;
      if (inflight.empty() || !comm) continue;
      NcclResult async = kNcclSuccess;
      api.commGetAsyncError(comm, &async);
      if (failed(async)) {
        abort(lock, "NCCL reported " + std::string(api.getErrorString(async)));
      } else if (std::chrono::steady_clock::now() > inflight.front()->deadline) {
        abort(lock, "not complete after KILN_DIST_TIMEOUT=" + std::to_string(settings().dist_timeout_s) +
                        " s: another rank died, hangs, or did not call the same collective");
      }
    }
  }

  /// Opens the libraries and the device, and on rank 0 makes the unique id.
  void setUp(NcclUniqueId* id) {
    NcclApi& a = api;
    const char* ncclPath = std::getenv("KILN_NCCL_LIBRARY");
    nccl = openLibrary(ncclPath ? ncclPath : "", "libnccl.so.2", "KILN_NCCL_LIBRARY");
    cuda = openLibrary(settings().cuda_library, "libcuda.so.1", "KILN_CUDA_LIBRARY");  // the CUDA backend's
    bind(nccl, "ncclGetUniqueId", a.getUniqueId);
    bind(nccl, "ncclCommInitRank", a.commInitRank);
    bind(nccl, "ncclCommDestroy", a.commDestroy);
    bind(nccl, "ncclCommAbort", a.commAbort);
    bind(nccl, "ncclCommGetAsyncError", a.commGetAsyncError);
    bind(nccl, "ncclGetErrorString", a.getErrorString);
    bind(nccl, "ncclAllReduce", a.allReduce);
    bind(nccl, "ncclBroadcast", a.broadcast);
    bind(nccl, "ncclAllGather", a.allGather);
    bind(nccl, "ncclReduceScatter", a.reduceScatter);
    bind(cuda, "cuInit", a.cuInit);
    bind(cuda, "cuDeviceGet", a.cuDeviceGet);
    bind(cuda, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain);
    bind(cuda, "cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease);
    bind(cuda, "cuCtxSetCurrent", a.cuCtxSetCurrent);
    bind(cuda, "cuStreamCreate", a.cuStreamCreate);
    bind(cuda, "cuStreamDestroy_v2", a.cuStreamDestroy);
    bind(cuda, "cuStreamSynchronize", a.cuStreamSynchronize);
    bind(cuda, "cuLaunchHostFunc", a.cuLaunchHostFunc);
    cudaCheck("cuInit", a.cuInit(0));
    cudaCheck("cuDeviceGet", a.cuDeviceGet(&cuDevice, device));
    cudaCheck("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&context, cuDevice));
    cudaCheck("cuCtxSetCurrent", a.cuCtxSetCurrent(context));
    cudaCheck("cuStreamCreate", a.cuStreamCreate(&ownStream, 0));
    if (bootstrap.rank() == 0)
      if (NcclResult r = a.getUniqueId(id); failed(r))
        throw Error("dist::nccl_communicator: ncclGetUniqueId: " + ncclError(r));
  }
};

namespace {
/// ncclCommInitRank, which waits for every rank, with a deadline: on a
/// thread of its own, since a blocking communicator's initialisation cannot
/// be aborted. Past KILN_DIST_TIMEOUT the call fails and the thread is left
/// behind (the process should exit; mpirun then ends the job).
NcclComm initRank(const NcclApi& api, CuContext context, int ranks, NcclUniqueId id, int rank) {
  struct Outcome {
    NcclResult result = kNcclSuccess;
    NcclComm comm = nullptr;
  };
  auto done = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> outcome = done->get_future();
  // The thread owns what it uses: after a timeout it outlives the caller.
  std::thread([done, setCurrent = api.cuCtxSetCurrent, init = api.commInitRank, context, ranks, id, rank] {
    setCurrent(context);
    Outcome o;
    o.result = init(&o.comm, ranks, id, rank);
    done->set_value(o);
  }).detach();
  const int64_t timeout = settings().dist_timeout_s;
  if (outcome.wait_for(std::chrono::seconds(timeout)) != std::future_status::ready)
    throw Error("dist::nccl_communicator: ncclCommInitRank not complete after KILN_DIST_TIMEOUT=" +
                std::to_string(timeout) + " s: another rank died or hangs (its thread is left behind)");
  const Outcome o = outcome.get();
  if (o.result != kNcclSuccess && o.result != kNcclInProgress)
    throw Error(std::string("dist::nccl_communicator: ncclCommInitRank: NCCL: ") + api.getErrorString(o.result));
  return o.comm;
}

/// A rank's set-up outcome, exchanged so that every rank fails together.
struct SetUpOutcome {
  char error[480] = {};  ///< "" when it went well
};
}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int cudaDevice)
    : state_(std::make_unique<State>(bootstrap, cudaDevice)) {
  State& s = *state_;
  NcclUniqueId id{};
  SetUpOutcome mine;
  try {
    s.setUp(&id);
  } catch (const Error& e) {
    std::snprintf(mine.error, sizeof(mine.error), "%s", e.what());
  }
  // A rank whose set-up failed would leave the others waiting in
  // ncclCommInitRank: every rank learns of it first, and all fail alike.
  const int n = bootstrap.size();
  std::vector<SetUpOutcome> all(static_cast<size_t>(n));
  bootstrap.all_gather_bytes(&mine, all.data(), sizeof(SetUpOutcome));
  for (int r = 0; r < n; ++r) {
    const char* error = all[static_cast<size_t>(r)].error;
    if (!*error) continue;
    throw Error(mine.error[0] ? std::string(mine.error)
                              : "dist::nccl_communicator: rank " + std::to_string(r) + " of " + std::to_string(n) +
                                    " could not set up NCCL: " + error);
  }
  // Rank 0's unique id, to every rank through the bootstrap communicator.
  bootstrap.broadcast(&id, sizeof(id), DType::u8, 0);
  s.comm = initRank(s.api, s.context, n, id, bootstrap.rank());
  s.watchdog = std::thread([&s] { s.watch(); });
  log().info("dist: NCCL communicator on cuda:{} (rank {} of {})", cudaDevice, bootstrap.rank(), n);
}

NcclCommunicator::~NcclCommunicator() = default;

std::string NcclCommunicator::failure() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->broken;
}

int NcclCommunicator::rank() const { return state_->bootstrap.rank(); }
int NcclCommunicator::size() const { return state_->bootstrap.size(); }

std::shared_future<void> NcclCommunicator::enqueue(core::OpKind op, int64_t attr, DType dtype, int64_t inCount,
                                                   int64_t outCount, const void* in, void* out, void* stream,
                                                   const std::string& what,
                                                   std::vector<std::shared_ptr<void>> keepAlive) {
  State& s = *state_;
  const NcclApi& a = s.api;
  auto flight = std::make_shared<Inflight>();
  flight->what = what;
  flight->keepAlive = std::move(keepAlive);
  flight->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(settings().dist_timeout_s);
  std::shared_future<void> done = flight->promise.get_future().share();
  s.cudaCheck("cuCtxSetCurrent", a.cuCtxSetCurrent(s.context));
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.comm) throw Error(what + ": the NCCL communicator was aborted (" + s.broken + ")");
    // Tracked before the call: a call that blocks inside NCCL (peers
    // connecting, a full queue behind a hung kernel) has a deadline too.
    s.inflight.push_back(flight);
  }
  s.wake.notify_all();
  std::unique_lock<std::mutex> calls(s.callMutex);
  NcclComm comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.comm) {  // aborted meanwhile (the abort failed the future)
      flight->deviceDone = true;
      throw Error(what + ": the NCCL communicator was aborted (" + s.broken + ")");
    }
    comm = s.comm;
  }
  // A failure once the collective may be queued leaves this rank out of
  // step with the others: the communicator is aborted. Its buffers are the
  // device's until the stream has got past it.
  auto fail = [&](const std::string& why, bool queued) {
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      s.abort(lock, why, true);
    }
    if (queued) a.cuStreamSynchronize(stream);
    flight->deviceDone = true;  // no host function will say so
    throw Error(what + ": " + why + "; the NCCL communicator is aborted");
  };
  const int type = ncclType(dtype);
  NcclResult r = kNcclSuccess;
  switch (op) {
    case core::OpKind::AllReduce:
      r = a.allReduce(in, out, static_cast<size_t>(inCount), type, ncclOp(static_cast<ReduceOp>(attr)), comm, stream);
      break;
    case core::OpKind::Broadcast:
      r = a.broadcast(in, out, static_cast<size_t>(inCount), type, static_cast<int>(attr), comm, stream);
      break;
    case core::OpKind::AllGather: r = a.allGather(in, out, static_cast<size_t>(inCount), type, comm, stream); break;
    case core::OpKind::ReduceScatter:
      r = a.reduceScatter(in, out, static_cast<size_t>(outCount), type, ncclOp(static_cast<ReduceOp>(attr)), comm,
                          stream);
      break;
    default: fail("not a collective", false);
  }
  if (State::failed(r)) fail(s.ncclError(r), false);
  auto* held = new std::shared_ptr<Inflight>(flight);
  if (CuResult c = a.cuLaunchHostFunc(stream, &completed, held); c != kCudaSuccess) {
    delete held;
    fail("cuLaunchHostFunc after the collective failed (CUDA error " + std::to_string(c) + ")", true);
  }
  return done;
}

namespace {
/// A blocking call's wait: a failed collective may still be on the device
/// (the futures fail before the abort ends it), and the caller's buffers
/// are free once this returns.
void await(const std::shared_future<void>& done, const NcclApi& api, CuStream stream) {
  try {
    done.get();
  } catch (...) {
    api.cuStreamSynchronize(stream);
    throw;
  }
}
}  // namespace

void NcclCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) {
  State& s = *state_;
  await(enqueue(core::OpKind::AllReduce, static_cast<int64_t>(op), dtype, count, count, in, out, s.ownStream,
                "dist::all_reduce (nccl)"),
        s.api, s.ownStream);
}

void NcclCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  State& s = *state_;
  await(enqueue(core::OpKind::Broadcast, root, dtype, count, count, buf, buf, s.ownStream, "dist::broadcast (nccl)"),
        s.api, s.ownStream);
}

void NcclCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  State& s = *state_;
  await(enqueue(core::OpKind::AllGather, 0, dtype, count, count * size(), in, out, s.ownStream,
                "dist::all_gather (nccl)"),
        s.api, s.ownStream);
}

void NcclCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) {
  State& s = *state_;
  await(enqueue(core::OpKind::ReduceScatter, static_cast<int64_t>(op), dtype, count * size(), count, in, out,
                s.ownStream, "dist::reduce_scatter (nccl)"),
        s.api, s.ownStream);
}

void NcclCommunicator::all_gather_bytes(const void* in, void* out, std::size_t bytes) {
  state_->bootstrap.all_gather_bytes(in, out, bytes);
}

void NcclCommunicator::barrier() { state_->bootstrap.barrier(); }

}  // namespace detail

std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap, int cuda_device) {
  return std::make_unique<detail::NcclCommunicator>(bootstrap, cuda_device);
}

}  // namespace kiln::dist
