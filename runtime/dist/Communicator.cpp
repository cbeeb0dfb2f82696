// The world communicator (init, world, finalize), the single-process
// backend, and the agreement check every collective runs first.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "runtime/core/Half.h"
#include "runtime/dist/Collectives.h"

namespace kiln::dist {

namespace {

/// Rank 0 of 1: every collective is a copy (what the ranks' reduction of
/// one contribution gives).
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single-process"; }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp) override {
    copy(in, out, count, dtype);
  }
  void broadcast(void*, int64_t, DType, int root) override {
    if (root != 0) throw Error("dist::broadcast: root " + std::to_string(root) + " is not a rank of 1 process");
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override { copy(in, out, count, dtype); }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp) override {
    copy(in, out, count, dtype);
  }
  void all_gather_bytes(const void* in, void* out, std::size_t bytes) override {
    if (bytes) std::memmove(out, in, bytes);
  }
  void barrier() override {}

 private:
  static void copy(const void* in, void* out, int64_t count, DType dtype) {
    if (in != out && count > 0) std::memmove(out, in, static_cast<std::size_t>(count) * dtype_size(dtype));
  }
};

/// The communication thread: runs the backend's calls one after another, in
/// the order they were handed over (so every rank issues its collectives in
/// its trace order). The backend is created, called and destroyed on it
/// (MPI is initialized there: MPI_THREAD_FUNNELED).
class CommunicationThread {
 public:
  CommunicationThread() : thread_([this] { serve(); }) {}
  ~CommunicationThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::shared_future<void> submit(std::function<void()> job) {
    std::packaged_task<void()> task(std::move(job));
    std::shared_future<void> done = task.get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(task));
    }
    cv_.notify_all();
    return done;
  }
  void run(std::function<void()> job) { submit(std::move(job)).get(); }

 private:
  void serve() {
    for (;;) {
      std::packaged_task<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();  // its exception goes to its future
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

/// The world communicator: a backend behind the communication thread. Its
/// blocking calls wait for their job; the interpreter starts collectives
/// without waiting (startCollective) and waits where their result is read.
class ThreadedCommunicator final : public Communicator {
 public:
  explicit ThreadedCommunicator(std::function<std::unique_ptr<Communicator>()> make) {
    thread_.run([&] { backend_ = make(); });
    rank_ = backend_->rank();
    size_ = backend_->size();
    name_ = backend_->backend();
  }
  ~ThreadedCommunicator() override {
    thread_.run([&] { backend_.reset(); });
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return name_; }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    thread_.run([&] { backend_->all_reduce(in, out, count, dtype, op); });
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    thread_.run([&] { backend_->broadcast(buf, count, dtype, root); });
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    thread_.run([&] { backend_->all_gather(in, out, count, dtype); });
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    thread_.run([&] { backend_->reduce_scatter(in, out, count, dtype, op); });
  }
  void all_gather_bytes(const void* in, void* out, std::size_t bytes) override {
    thread_.run([&] { backend_->all_gather_bytes(in, out, bytes); });
  }
  void barrier() override {
    thread_.run([&] { backend_->barrier(); });
  }
  /// Runs `job` on the backend, on the communication thread, after the jobs
  /// handed over before it.
  std::shared_future<void> start(std::function<void(Communicator&)> job) {
    return thread_.submit([this, job = std::move(job)] { job(*backend_); });
  }

 private:
  CommunicationThread thread_;
  std::unique_ptr<Communicator> backend_;
  int rank_ = 0, size_ = 1;
  std::string name_;
};

std::mutex gMutex;
std::unique_ptr<ThreadedCommunicator> gWorld;
bool gFinalized = false;

ThreadedCommunicator& threadedWorld() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gWorld) throw Error("dist: no communicator; call kiln::dist::init() first (once, at the start of main)");
  return *gWorld;
}

void finalizeAtExit() { finalize(); }

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
  }
  return "?";
}

void init() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gWorld) return;
  if (gFinalized) throw Error("dist::init: the communicator was finalized; a process initializes it once");
  if (detail::launchedByMpi()) {
    gWorld = std::make_unique<ThreadedCommunicator>([] {
      std::unique_ptr<Communicator> mpi = detail::createMpiCommunicator();
      if (!mpi)
        throw Error("dist::init: this process was started by mpirun but Kiln was built without MPI; install "
                    "libopenmpi-dev (scripts/setup.sh) and rebuild, or run without mpirun");
      return mpi;
    });
  } else {
    gWorld = std::make_unique<ThreadedCommunicator>([] { return std::make_unique<SingleProcessCommunicator>(); });
  }
  std::atexit(finalizeAtExit);
}

bool initialized() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gWorld != nullptr;
}

Communicator& world() { return threadedWorld(); }

int rank() { return world().rank(); }
int size() { return world().size(); }

int local_rank() {
  static std::mutex mutex;
  static int cached = -1;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached >= 0) return cached;
  Communicator& w = world();
  struct HostName {
    char text[256] = {};
  } mine;
  if (gethostname(mine.text, sizeof(mine.text) - 1) != 0) std::snprintf(mine.text, sizeof(mine.text), "?");
  std::vector<HostName> all(static_cast<size_t>(w.size()));
  w.all_gather_bytes(&mine, all.data(), sizeof(HostName));
  int local = 0;
  for (int r = 0; r < w.rank(); ++r)
    if (std::strncmp(all[static_cast<size_t>(r)].text, mine.text, sizeof(mine.text)) == 0) ++local;
  cached = local;
  return cached;
}

void finalize() {
  detail::releaseDeviceCommunicators();
  std::unique_ptr<ThreadedCommunicator> w;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    w = std::move(gWorld);
    if (w) gFinalized = true;
  }
  w.reset();  // the MPI backend finalizes in its destructor, on the communication thread
}

namespace detail {

#ifndef KILN_HAVE_MPI
std::unique_ptr<Communicator> createMpiCommunicator() { return nullptr; }  // built without MPI: init() says so
#endif

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

std::string describe(core::OpKind op, DType dtype, const Shape& shape, int rank, int size) {
  return "dist::" + std::string(core::opName(op)) + " (" + std::string(dtype_name(dtype)) + " " + shape.str() +
         ", rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
}

namespace {
/// What each rank says it is about to run (fixed size, compared bytewise).
struct Agreement {
  int32_t op = 0, dtype = 0, rank = 0;
  int32_t ndim = 0;
  int32_t device = 0;  ///< Device::Kind
  int32_t pad = 0;     ///< compared too: zero
  int64_t attr = 0;
  int64_t dims[Shape::kMaxRank] = {};
};

std::string sideOf(const Agreement& a) {
  std::string s = "dist::" + std::string(core::opName(static_cast<core::OpKind>(a.op))) + " on " +
                  std::string(dtype_name(static_cast<DType>(a.dtype))) + " [";
  for (int d = 0; d < a.ndim; ++d) s += (d ? ", " : "") + std::to_string(a.dims[d]);
  s += "]";
  const auto op = static_cast<core::OpKind>(a.op);
  if (op == core::OpKind::Broadcast) s += " from root " + std::to_string(a.attr);
  if (op == core::OpKind::AllReduce || op == core::OpKind::ReduceScatter)
    s += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(a.attr)) + ")";
  s += static_cast<Device::Kind>(a.device) == Device::CUDA ? " of CUDA tensors" : " of host tensors";
  return s;
}
}  // namespace

void checkAgreement(Communicator& comm, core::OpKind op, int64_t attr, DType dtype, const Shape& shape,
                    Device::Kind device) {
  Agreement mine;
  mine.op = static_cast<int32_t>(op);
  mine.device = static_cast<int32_t>(device);
  mine.dtype = static_cast<int32_t>(dtype);
  mine.ndim = shape.rank();
  mine.attr = attr;
  for (int d = 0; d < shape.rank(); ++d) mine.dims[d] = shape[d];
  const int n = comm.size();
  if (n == 1) return;
  std::vector<Agreement> all(static_cast<size_t>(n));
  comm.all_gather_bytes(&mine, all.data(), sizeof(Agreement));
  for (int r = 0; r < n; ++r) {
    Agreement other = all[static_cast<size_t>(r)];
    other.rank = 0;
    if (std::memcmp(&other, &mine, sizeof(Agreement)) == 0) continue;
    throw Error("dist: collective mismatch: rank " + std::to_string(comm.rank()) + " runs " + sideOf(mine) +
                " but rank " + std::to_string(r) + " runs " + sideOf(all[static_cast<size_t>(r)]) +
                "; every rank must record the same collectives in the same order, with the same dtype, shape, "
                "attributes and kind of device");
  }
}

void divideBySize(void* data, int64_t count, DType dtype, int size) {
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(data);
      const float s = static_cast<float>(size);
      for (int64_t i = 0; i < count; ++i) p[i] /= s;
      return;
    }
    case DType::f64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] /= size;
      return;
    }
    case DType::f16: {
      auto* p = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] = core::floatToHalf(core::halfToFloat(p[i]) / static_cast<float>(size));
      return;
    }
    case DType::bf16: {
      auto* p = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) p[i] = core::floatToBf16(core::bf16ToFloat(p[i]) / static_cast<float>(size));
      return;
    }
    default:
      throw Error("dist::all_reduce: mean of " + std::string(dtype_name(dtype)) +
                  " tensors is not defined (it takes floating dtypes); use sum, or cast to a floating type first");
  }
}

/// The collective itself, on the communication thread.
void runOn(Communicator& comm, core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
           const Shape& outShape, const void* in, void* out);

std::shared_future<void> startCollective(core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
                                         const Shape& outShape, const void* in, void* out,
                                         std::vector<std::shared_ptr<void>> keepAlive) {
  return threadedWorld().start([=, keepAlive = std::move(keepAlive)](Communicator& comm) {
    try {
      runOn(comm, op, attr, dtype, inShape, outShape, in, out);
    } catch (const Error& e) {
      // Name the recorded collective (the failure may be in its agreement
      // exchange).
      throw Error(describe(op, dtype, inShape, comm.rank(), comm.size()) + ": " + e.what());
    }
  });
}

void runOn(Communicator& comm, core::OpKind op, int64_t attr, DType dtype, const Shape& inShape,
           const Shape& outShape, const void* in, void* out) {
  checkAgreement(comm, op, attr, dtype, inShape);
  const int64_t inCount = inShape.numel(), outCount = outShape.numel();
  switch (op) {
    case core::OpKind::AllReduce: comm.all_reduce(in, out, inCount, dtype, static_cast<ReduceOp>(attr)); return;
    case core::OpKind::Broadcast:
      if (in != out && inCount > 0) std::memcpy(out, in, static_cast<std::size_t>(inCount) * dtype_size(dtype));
      comm.broadcast(out, inCount, dtype, static_cast<int>(attr));
      return;
    case core::OpKind::AllGather: comm.all_gather(in, out, inCount, dtype); return;
    case core::OpKind::ReduceScatter:
      comm.reduce_scatter(in, out, outCount, dtype, static_cast<ReduceOp>(attr));
      return;
    default: throw Error("dist: " + std::string(core::opName(op)) + " is not a collective");
  }
}

}  // namespace detail
}  // namespace kiln::dist
