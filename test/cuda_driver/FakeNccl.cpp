// libkiln_fake_nccl.so: the NCCL entry points Kiln uses
// (runtime/dist/NcclCommunicator.cpp), for ranks on the fake CUDA driver
// (FakeCuda.cpp), whose device memory is host memory. Tests load it through
// KILN_NCCL_LIBRARY next to KILN_CUDA_LIBRARY and run under mpirun, so that
// CI runs Kiln's NCCL path between processes. Compiled against the real
// nccl.h: the signatures are NCCL's.
//
// The ranks meet in a POSIX shared-memory segment named by the unique id
// (one slot per rank and a barrier counter). Each collective is enqueued on
// its stream through the fake driver (kiln_fake_cuda_enqueue_device_work),
// so it runs in stream order with device memory open, as an NCCL kernel;
// there it waits for the other ranks as NCCL's kernels do: until they come,
// or until ncclCommAbort. Every rank reduces the ranks' contributions in
// rank order, so every rank gets the same bits.
//
// Failure injection (environment, read at ncclCommInitRank):
//   KILN_FAKE_NCCL_HANG=<rank>:<n>   rank <rank> does not join its n-th
//       collective (0-based) on the device: the call returns ncclSuccess and
//       the other ranks wait on the device, as behind a hung peer.
//   KILN_FAKE_NCCL_ERROR=<rank>:<n>  rank <rank>'s n-th collective hangs on
//       the device and ncclCommGetAsyncError reports ncclRemoteError, as
//       after a network failure.
//   KILN_FAKE_NCCL_INIT_HANG=<rank>  rank <rank>'s ncclCommInitRank never
//       returns (a rank that hangs before joining): the others wait in
//       theirs.
#include "test/cuda_driver/FakeNccl.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "runtime/core/Half.h"
#include "test/cuda_driver/FakeCuda.h"

namespace {

std::atomic<size_t> gCollectives{0};

/// Bytes each rank stages per round; larger collectives take several rounds.
constexpr std::size_t kSlotBytes = std::size_t{1} << 20;
constexpr std::size_t kHeaderBytes = 64;

struct Segment {
  std::atomic<int> joined;
  std::atomic<uint64_t> arrivals;  ///< barrier arrivals, never reset
};

/// One rank's communicator; the device work of its collectives holds it too,
/// so that ncclCommDestroy / ncclCommAbort never free what a queued
/// collective still uses.
struct CommState {
  int rank = 0, nranks = 1;
  char* base = nullptr;
  std::size_t bytes = 0;
  uint64_t barriers = 0;  ///< this rank's barriers so far (device work only: one stream at a time)
  int collectives = 0;    ///< enqueued so far (failure injection counts them)
  int hangAt = -1, errorAt = -1;
  std::atomic<bool> aborted{false};
  std::atomic<int> asyncError{ncclSuccess};

  ~CommState() {
    if (base) munmap(base, bytes);
  }
  Segment& segment() { return *reinterpret_cast<Segment*>(base); }
  char* slot(int r) { return base + kHeaderBytes + static_cast<std::size_t>(r) * kSlotBytes; }

  /// Waits until every rank has arrived; false when aborted meanwhile.
  bool barrier() {
    const uint64_t target = ++barriers * static_cast<uint64_t>(nranks);
    segment().arrivals.fetch_add(1);
    for (int spins = 0; segment().arrivals.load() < target; ++spins) {
      if (aborted.load()) return false;
      if (spins < 1000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }
  /// Device work that never completes on its own (a hung peer, a broken
  /// network): it ends with ncclCommAbort.
  void waitForAbort() {
    while (!aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

}  // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
};

namespace {

std::size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

bool isFloating(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}

template <class T>
T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
    case ncclAvg: return static_cast<T>(a + b);
    case ncclProd: return static_cast<T>(a * b);
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return a;
  }
}

template <class T>
void reduceTyped(CommState& c, std::size_t n, ncclRedOp_t op, T* out) {
  for (std::size_t i = 0; i < n; ++i) {
    T acc = reinterpret_cast<const T*>(c.slot(0))[i];
    for (int r = 1; r < c.nranks; ++r) acc = combine(acc, reinterpret_cast<const T*>(c.slot(r))[i], op);
    if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(c.nranks));
    out[i] = acc;
  }
}

/// f16 / bf16: combined in f32, rounded once.
void reduceHalf(CommState& c, std::size_t n, ncclRedOp_t op, uint16_t* out, bool bf16) {
  using namespace kiln::core;
  for (std::size_t i = 0; i < n; ++i) {
    auto at = [&](int r) {
      const uint16_t v = reinterpret_cast<const uint16_t*>(c.slot(r))[i];
      return bf16 ? bf16ToFloat(v) : halfToFloat(v);
    };
    float acc = at(0);
    for (int r = 1; r < c.nranks; ++r) acc = combine(acc, at(r), op);
    if (op == ncclAvg) acc /= static_cast<float>(c.nranks);
    out[i] = bf16 ? floatToBf16(acc) : floatToHalf(acc);
  }
}

/// out[0, n) = the reduction of the ranks' slots.
void reduceSlots(CommState& c, std::size_t n, ncclDataType_t t, ncclRedOp_t op, void* out) {
  switch (t) {
    case ncclInt8: return reduceTyped(c, n, op, static_cast<int8_t*>(out));
    case ncclUint8: return reduceTyped(c, n, op, static_cast<uint8_t*>(out));
    case ncclInt32: return reduceTyped(c, n, op, static_cast<int32_t*>(out));
    case ncclUint32: return reduceTyped(c, n, op, static_cast<uint32_t*>(out));
    case ncclInt64: return reduceTyped(c, n, op, static_cast<int64_t*>(out));
    case ncclUint64: return reduceTyped(c, n, op, static_cast<uint64_t*>(out));
    case ncclFloat32: return reduceTyped(c, n, op, static_cast<float*>(out));
    case ncclFloat64: return reduceTyped(c, n, op, static_cast<double*>(out));
    case ncclFloat16: return reduceHalf(c, n, op, static_cast<uint16_t*>(out), false);
    case ncclBfloat16: return reduceHalf(c, n, op, static_cast<uint16_t*>(out), true);
    default: return;
  }
}

enum class Kind { AllReduce, Broadcast, AllGather, ReduceScatter };

/// One collective, as its device work.
struct Job {
  std::shared_ptr<CommState> comm;
  Kind kind;
  const char* in;
  char* out;
  std::size_t count;  ///< all_reduce, broadcast: elements; all_gather: sendcount; reduce_scatter: recvcount
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  bool fail = false;  ///< KILN_FAKE_NCCL_ERROR: hang with an asynchronous error
};

/// Copies [off, off + n) elements of `src` into this rank's slot, waits for
/// the others; false when aborted.
bool stage(CommState& c, const char* src, std::size_t off, std::size_t n, std::size_t es) {
  std::memcpy(c.slot(c.rank), src + off * es, n * es);
  return c.barrier();
}

void runJob(void* p) {
  std::unique_ptr<Job> job(static_cast<Job*>(p));
  CommState& c = *job->comm;
  if (job->fail) {
    c.asyncError = ncclRemoteError;
    c.waitForAbort();
    return;
  }
  const std::size_t es = typeSize(job->type), per = kSlotBytes / es;
  for (std::size_t off = 0; off < job->count; off += per) {
    const std::size_t n = std::min(per, job->count - off);
    switch (job->kind) {
      case Kind::AllReduce:
        if (!stage(c, job->in, off, n, es)) return;
        reduceSlots(c, n, job->type, job->op, job->out + off * es);
        break;
      case Kind::Broadcast:
        if (c.rank == job->root) std::memcpy(c.slot(c.rank), job->in + off * es, n * es);
        if (!c.barrier()) return;
        std::memcpy(job->out + off * es, c.slot(job->root), n * es);
        break;
      case Kind::AllGather:
        if (!stage(c, job->in, off, n, es)) return;
        for (int r = 0; r < c.nranks; ++r)
          std::memcpy(job->out + (static_cast<std::size_t>(r) * job->count + off) * es, c.slot(r), n * es);
        break;
      case Kind::ReduceScatter:
        // Part p of every rank's input, reduced into rank p's output.
        for (int part = 0; part < c.nranks; ++part) {
          if (!stage(c, job->in, static_cast<std::size_t>(part) * job->count + off, n, es)) return;
          if (part == c.rank) reduceSlots(c, n, job->type, job->op, job->out + off * es);
          if (part + 1 < c.nranks && !c.barrier()) return;
        }
        break;
    }
    if (!c.barrier()) return;  // the slots are free again
  }
}

/// "<rank>:<n>" from `name` for this rank: n, else -1.
int injectedAt(const char* name, int rank) {
  const char* v = std::getenv(name);
  int r = -1, n = -1;
  if (!v || std::sscanf(v, "%d:%d", &r, &n) != 2 || r != rank) return -1;
  return n;
}

ncclResult_t enqueue(ncclComm_t comm, Job job, cudaStream_t stream) {
  if (!comm || !comm->state) return ncclInvalidArgument;
  CommState& c = *comm->state;
  if (c.aborted) return ncclInvalidUsage;
  if (typeSize(job.type) == 0 || static_cast<int>(job.op) < 0 || job.op > ncclAvg) return ncclInvalidArgument;
  if (job.op == ncclAvg && !isFloating(job.type)) return ncclInvalidArgument;
  if (job.kind == Kind::Broadcast && (job.root < 0 || job.root >= c.nranks)) return ncclInvalidArgument;
  if ((job.count && (!job.in || !job.out))) return ncclInvalidArgument;
  const int index = c.collectives++;
  ++gCollectives;
  if (job.count == 0) return ncclSuccess;  // nothing moves, as in NCCL
  if (index == c.hangAt) return ncclSuccess;
  job.fail = index == c.errorAt;
  static const KilnFakeCudaEnqueue enqueueWork = kilnFakeCudaEnqueue();
  if (!enqueueWork) {
    std::fprintf(stderr, "fake NCCL: KILN_CUDA_LIBRARY is not the fake CUDA driver\n");
    return ncclUnhandledCudaError;
  }
  job.comm = comm->state;
  auto* work = new Job(std::move(job));
  if (enqueueWork(stream, &runJob, work) != 0) {
    delete work;
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return ncclInvalidArgument;
  static std::atomic<int> counter{0};
  std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::snprintf(uniqueId->internal, sizeof(uniqueId->internal), "/kiln-fake-nccl-%d-%d-%lld",
                static_cast<int>(getpid()), counter++, static_cast<long long>(now));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  const std::string name(commId.internal, strnlen(commId.internal, sizeof(commId.internal)));
  if (name.rfind("/kiln-fake-nccl-", 0) != 0) return ncclInvalidArgument;
  if (const char* hang = std::getenv("KILN_FAKE_NCCL_INIT_HANG"); hang && std::atoi(hang) == rank)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->bytes = kHeaderBytes + static_cast<std::size_t>(nranks) * kSlotBytes;
  state->hangAt = injectedAt("KILN_FAKE_NCCL_HANG", rank);
  state->errorAt = injectedAt("KILN_FAKE_NCCL_ERROR", rank);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return ncclSystemError;
  // Every rank sizes it alike; a later ftruncate keeps what is there.
  if (ftruncate(fd, static_cast<off_t>(state->bytes)) != 0) {
    close(fd);
    return ncclSystemError;
  }
  void* base = mmap(nullptr, state->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return ncclSystemError;
  state->base = static_cast<char*>(base);
  // Wait for every rank, as ncclCommInitRank does; then the name can go.
  state->segment().joined.fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (state->segment().joined.load() < nranks) {
    if (std::chrono::steady_clock::now() > deadline) return ncclSystemError;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (rank == 0) shm_unlink(name.c_str());
  *comm = new ncclComm{std::move(state)};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  delete comm;  // queued collectives keep the state until they have run
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  comm->state->aborted = true;  // device work waiting for the other ranks returns
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!comm || !asyncError) return ncclInvalidArgument;
  *asyncError = static_cast<ncclResult_t>(comm->state->asyncError.load());
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm,
                 Job{nullptr, Kind::AllReduce, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), count,
                     datatype, op, 0},
                 stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm,
                 Job{nullptr, Kind::Broadcast, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), count,
                     datatype, ncclSum, root},
                 stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm,
                 Job{nullptr, Kind::AllGather, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff),
                     sendcount, datatype, ncclSum, 0},
                 stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm,
                 Job{nullptr, Kind::ReduceScatter, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff),
                     recvcount, datatype, op, 0},
                 stream);
}

size_t kiln_fake_nccl_collectives() { return gCollectives.load(); }

}  // extern "C"
