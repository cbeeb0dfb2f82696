// A fake CUDA driver for tests on machines without a GPU: the Driver API
// entry points Kiln uses (runtime/backends/cuda/CudaApi.cpp), loaded through
// KILN_CUDA_LIBRARY. It is never a GPU:
//  - device memory is host memory reserved PROT_NONE and opened only while
//    the device's own stream work (copies, memsets, kernels) runs, so a host
//    access to device memory by mistake faults;
//  - each stream is a worker thread running its work in order,
//    asynchronously to the caller; events mark points in streams;
//  - every call is counted and logged; every launch is checked: the module is
//    loaded, the entry is in its PTX, the parameter count and sizes match the
//    PTX's .entry signature, pointer parameters point into live device
//    allocations, grid and block are within the limits of a real GPU;
//  - failures are injected by kiln_fake_cuda_inject (FakeCuda.h) or
//    KILN_FAKE_CUDA_FAIL=kind:skip:times[,...].
// What a kernel computes is NOT taken from its PTX (the fake cannot run
// PTX; ptxas checks the PTX in other tests): a launch of a Kiln tier-0
// kernel (runtime/backends/gpu/Tier0Kernels.h) runs the host reference
// kernel of the same op and dtypes (runtime/interp) on the decoded
// parameters. That exercises everything the backend does around a launch
// (kernel choice, parameter packing, strides, streams, memory), not the PTX.
// Modules of compiled traces (any other kernel) are refused at
// cuModuleLoadData, so Kiln keeps such traces in tier 0 and computes right;
// with KILN_FAKE_CUDA_COMPILED=launch they load, and each launch is checked
// (parameter count and sizes, pointer parameters, those marked .ptr in the
// PTX, inside live allocations) and counted, but computes nothing; with
// KILN_FAKE_CUDA_PTXAS=<ptxas> each such module must also pass ptxas.
// Graphs of kernel nodes (cuGraphCreate, cuGraphAddKernelNode, instantiate,
// cuGraphExecKernelNodeSetParams, cuGraphLaunch) keep each node's parameter
// values; a graph launch checks and enqueues its nodes in order exactly as
// that many cuLaunchKernel calls would, so stale parameters (a pointer into
// memory freed since) are rejected there. Each compiled kernel's launch is
// logged with its grid and parameter values ("compiled-launch <entry> grid
// <x> <y> <z> <values>").
#include "test/cuda_driver/FakeCuda.h"

#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/backends/gpu/Tier0Kernels.h"
#include "runtime/interp/Kernels.h"

namespace {

using kiln::hal::tier0::Family;
using kiln::hal::tier0::KernelSpec;
using kiln::hal::tier0::Layout;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kAlign = 256;
std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ---------------------------------------------------------------------------
// Failure injection and the call log.

struct Fault {
  int skip = 0, times = 0;
  /// Does this matching call fail?
  bool hit() {
    if (times <= 0) return false;
    if (skip > 0) {
      --skip;
      return false;
    }
    --times;
    return true;
  }
};

struct Global {
  std::mutex mutex;
  std::unordered_map<std::string, size_t> counts;
  std::deque<std::string> log;
  std::string logText;
  Fault oom, launch, fault;
  /// Set by a lost device or a kernel that faulted: every later call fails
  /// with it (sticky, as on a GPU) until kiln_fake_cuda_reset_faults().
  CUresult sticky = CUDA_SUCCESS;
  Fault lostAfter;
  std::atomic<size_t> rejected{0};
  std::atomic<size_t> compiledLaunches{0};
  std::atomic<size_t> ptxasChecked{0};
  std::atomic<size_t> graphLaunches{0};
};
Global& global() {
  static Global* g = new Global();
  return *g;
}

/// Counts and logs one call; returns the sticky error once there is one.
CUresult enter(const char* name, const std::string& detail = {}) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  ++g.counts[name];
  g.log.push_back(detail.empty() ? std::string(name) : std::string(name) + " " + detail);
  if (g.log.size() > 4096) g.log.pop_front();
  if (g.sticky == CUDA_SUCCESS && g.lostAfter.hit()) g.sticky = CUDA_ERROR_DEVICE_UNAVAILABLE;
  return g.sticky;
}

bool injected(Fault Global::*which) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return (g.*which).hit();
}

void readFailEnv() {
  const char* v = std::getenv("KILN_FAKE_CUDA_FAIL");
  if (!v) return;
  std::string spec(v);
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    char kind[32] = {};
    int skip = 0, times = 1;
    if (std::sscanf(item.c_str(), "%31[a-z]:%d:%d", kind, &skip, &times) >= 1) kiln_fake_cuda_inject(kind, skip, times);
    start = end + 1;
  }
}

// ---------------------------------------------------------------------------
// Devices, memory, streams, events, modules.

struct Device;

struct Stream {
  Device* device = nullptr;
  std::mutex mutex;
  std::condition_variable cv, doneCv;
  std::deque<std::function<CUresult()>> queue;
  uint64_t enqueued = 0, completed = 0;
  CUresult error = CUDA_SUCCESS;  ///< the first failure since the last synchronisation
  bool stopping = false;
  std::thread worker;

  explicit Stream(Device* d) : device(d), worker([this] { serve(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    cv.notify_all();
    worker.join();
  }
  void enqueue(std::function<CUresult()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(std::move(fn));
      ++enqueued;
    }
    cv.notify_one();
  }
  void waitFor(uint64_t id) {
    std::unique_lock<std::mutex> lock(mutex);
    doneCv.wait(lock, [&] { return completed >= id; });
  }
  CUresult synchronize() {
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mutex);
      id = enqueued;
    }
    waitFor(id);
    std::lock_guard<std::mutex> lock(mutex);
    CUresult e = error;
    error = CUDA_SUCCESS;
    return e;
  }
  void serve() {
    for (;;) {
      std::function<CUresult()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        fn = std::move(queue.front());
        queue.pop_front();
      }
      CUresult r = fn();
      fn = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (r != CUDA_SUCCESS && error == CUDA_SUCCESS) error = r;
        ++completed;
      }
      doneCv.notify_all();
    }
  }
};

struct Event {
  Stream* stream = nullptr;
  uint64_t id = 0;
};

/// Live events: a destroyed stream detaches the events recorded on it (its
/// work is done by then), as on a real GPU, where such an event stays
/// queryable and complete.
std::mutex gEventsMutex;
std::unordered_set<Event*> gEvents;

struct Device {
  int index = 0;
  int sm = 90;
  char* base = nullptr;
  std::size_t capacity = 0;
  std::mutex mutex;
  std::size_t top = 0;       ///< bytes of the reservation handed out so far
  int openCount = 0;
  std::map<uintptr_t, std::size_t> allocations;  ///< live: address -> size
  std::map<uintptr_t, std::size_t> holes;        ///< freed ranges below top
  std::size_t allocated = 0;
  std::unique_ptr<Stream> legacy;  ///< the NULL stream
  std::set<Stream*> streams;

  void protect(std::size_t from, std::size_t to, bool open) {
    from = from / kPage * kPage;
    to = roundUp(to, kPage);
    if (to > from) mprotect(base + from, to - from, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex);
    if (openCount++ == 0) protect(0, top, true);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex);
    if (--openCount == 0) protect(0, top, false);
  }
  bool contains(uintptr_t p) const {
    return p >= reinterpret_cast<uintptr_t>(base) && p < reinterpret_cast<uintptr_t>(base) + capacity;
  }
  /// Is [p, p + bytes) inside one live allocation?
  bool live(uintptr_t p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin()) return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
  }
};

/// Runs `fn` with the device's memory open (device work only).
CUresult onDevice(Device* d, const std::function<void()>& fn) {
  d->open();
  CUresult r = CUDA_SUCCESS;
  try {
    fn();
  } catch (...) {
    r = CUDA_ERROR_LAUNCH_FAILED;
  }
  d->close();
  return r;
}

/// An entry point's parameters: their sizes, and which are pointers (.ptr).
struct Signature {
  std::vector<std::size_t> params;
  std::vector<bool> pointer;
};

struct Module {
  Device* device = nullptr;
  std::string ptx;
  std::map<std::string, Signature> entries;
};

struct Function {
  Module* module = nullptr;
  std::string name;
  std::vector<std::size_t> params;
  std::vector<bool> pointer;
};

struct Driver {
  std::vector<std::unique_ptr<Device>> devices;
  std::mutex mutex;
  std::set<Module*> modules;
  std::set<void*> pinned;
  std::map<uintptr_t, std::size_t> pinnedRanges;
};
Driver* gDriver = nullptr;
thread_local Device* tCurrent = nullptr;

Driver& driver() { return *gDriver; }

Device* deviceOf(CUcontext c) { return reinterpret_cast<Device*>(c); }
Stream* streamOf(CUstream s) {
  if (!s) return tCurrent ? tCurrent->legacy.get() : nullptr;
  return reinterpret_cast<Stream*>(s);
}

bool isPinned(const void* p) {
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto it = d.pinnedRanges.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == d.pinnedRanges.begin()) return false;
  --it;
  return reinterpret_cast<uintptr_t>(p) < it->first + it->second;
}

Device* deviceOfPointer(uintptr_t p) {
  for (auto& d : driver().devices)
    if (d->contains(p)) return d.get();
  return nullptr;
}

/// The .entry signatures of a PTX module: name -> parameter sizes.
bool parsePtx(const std::string& ptx, int deviceSm, std::map<std::string, Signature>* entries) {
  if (ptx.find(".version") == std::string::npos) return false;
  std::smatch target;
  static const std::regex targetRe(R"(\.target\s+sm_(\d+))");
  if (!std::regex_search(ptx, target, targetRe)) return false;
  if (std::stoi(target[1]) > deviceSm) return false;  // PTX for a newer GPU
  static const std::regex entryRe(R"(\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\))");
  // ".param .u64 name", ".param .u64 .ptr .align 1 name", ".param .align 8 .b8 name[48]"
  static const std::regex paramRe(
      R"(\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)(\s+\.ptr)?(?:\s+\.(?:global|shared|const|local))?(?:\s+\.align\s+\d+)?\s+[\w$]+(?:\[(\d+)\])?)");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), entryRe); it != std::sregex_iterator(); ++it) {
    Signature sig;
    const std::string params = (*it)[2];
    for (auto p = std::sregex_iterator(params.begin(), params.end(), paramRe); p != std::sregex_iterator(); ++p) {
      const std::size_t bits = std::stoul((*p)[2]);
      const std::size_t count = (*p)[4].matched ? std::stoul((*p)[4]) : 1;
      sig.params.push_back(bits / 8 * count);
      sig.pointer.push_back((*p)[3].matched);
    }
    (*entries)[(*it)[1]] = sig;
  }
  return !entries->empty();
}

// ---------------------------------------------------------------------------
// Shadow execution of Kiln's tier-0 kernels (see the file comment).

const std::unordered_map<std::string, KernelSpec>& tier0Specs() {
  static const auto* specs = [] {
    auto* m = new std::unordered_map<std::string, KernelSpec>();
    for (const KernelSpec& s : kiln::hal::tier0::allKernels()) (*m)[s.entryName()] = s;
    return m;
  }();
  return *specs;
}

/// Reads the 8-byte parameters of a tier-0 launch into reference-kernel calls.
struct Tier0Launch {
  KernelSpec spec;
  std::vector<uint64_t> p;

  kiln::Shape shape(int64_t n) const {
    if (spec.layout == Layout::Rank1) return kiln::Shape{n};
    std::vector<int64_t> dims;
    const std::size_t at = 2 + static_cast<std::size_t>(spec.inputCount());
    for (int d = 0; d < kiln::hal::tier0::kRank; ++d) dims.push_back(static_cast<int64_t>(p[at + d]));
    return kiln::Shape(dims);
  }
  /// The element strides of strided operand `k` (0: the output when it has strides).
  void strides(int k, int64_t* out) const {
    const std::size_t base = 2 + static_cast<std::size_t>(spec.inputCount());
    if (spec.layout == Layout::Rank1) {
      out[0] = static_cast<int64_t>(p[base + k]);
      return;
    }
    const std::size_t at = base + kiln::hal::tier0::kRank + k * kiln::hal::tier0::kRank;
    for (int d = 0; d < kiln::hal::tier0::kRank; ++d) out[d] = static_cast<int64_t>(p[at + d]);
  }
  /// The element offsets of position `lin` over the kRank extents at p[at],
  /// one for each of the `sets` stride sets that follow them (p[at + kRank],
  /// p[at + 2 kRank], ...): the kernels' coordinates, innermost axis first.
  void positionOffsets(uint64_t lin, std::size_t at, int sets, int64_t* offsets) const {
    constexpr int R = kiln::hal::tier0::kRank;
    std::fill(offsets, offsets + sets, int64_t{0});
    auto rest = static_cast<int64_t>(lin);
    for (int d = R - 1; d >= 0; --d) {
      const auto e = static_cast<int64_t>(p[at + d]);
      const int64_t c = rest % e;
      rest /= e;
      for (int k = 0; k < sets; ++k) offsets[k] += c * static_cast<int64_t>(p[at + (k + 1) * R + d]);
    }
  }
  /// One of index_add's additions, *dst += *src, rounded as the reference
  /// kernel rounds it (halves through f32, integers wrap).
  void addElement(char* dst, const char* src) const {
    const int64_t unit = 1, first = 0;
    kiln::interp::Arg element;
    element.data = src;
    element.dtype = spec.in;
    element.shape = kiln::Shape{1};
    element.strides[0] = 1;
    kiln::interp::indexAddInto(dst, kiln::Shape{1}, &unit, 0, &first, 1, element);
  }
  kiln::interp::Arg input(int i, kiln::DType t, const kiln::Shape& s) const {
    kiln::interp::Arg a;
    a.data = reinterpret_cast<const char*>(p[1 + i]);
    a.dtype = t;
    a.shape = s;
    strides(i + (spec.stridedOutput() ? 1 : 0), a.strides);
    return a;
  }
  void run() const {
    namespace interp = kiln::interp;
    char* out = reinterpret_cast<char*>(p[0]);
    if (spec.family == Family::Fill) {
      const std::size_t size = kiln::dtype_size(spec.out);
      for (uint64_t i = 0; i < p[1]; ++i) std::memcpy(out + i * size, &p[2], size);
      return;
    }
    if (spec.family == Family::Arange) {
      double start = 0, step = 0;
      std::memcpy(&start, &p[2], 8);
      std::memcpy(&step, &p[3], 8);
      interp::arangeKernel(spec.out, static_cast<int64_t>(p[1]), start, step, out);
      return;
    }
    if (spec.family == Family::Random) {
      interp::randomKernel(spec.op, spec.out, static_cast<int64_t>(p[1]), p[2], out);
      return;
    }
    if (spec.family == Family::Contract) {
      // Each output element: the reference matmul of a [1, K] row by a [K, 1] column.
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      const auto k = static_cast<int64_t>(p[4 + 3 * R]);
      interp::Arg a, b;
      a.dtype = b.dtype = spec.in;
      a.shape = kiln::Shape{1, k};
      b.shape = kiln::Shape{k, 1};
      a.strides[1] = static_cast<int64_t>(p[5 + 3 * R]);
      b.strides[0] = static_cast<int64_t>(p[6 + 3 * R]);
      for (uint64_t o = 0; o < p[3]; ++o) {
        int64_t off[2];
        positionOffsets(o, 4, 2, off);
        a.data = reinterpret_cast<const char*>(p[1]) + off[0] * static_cast<int64_t>(size);
        b.data = reinterpret_cast<const char*>(p[2]) + off[1] * static_cast<int64_t>(size);
        interp::matmulKernel(a, b, kiln::Shape{1, 1}, out + o * size);
      }
      return;
    }
    if (spec.family == Family::ArgReduce) {
      // Each output element: the reference argmax/argmin of its axis (a
      // rank-1 view; a direction of -1 selects the last extreme).
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      const auto len = static_cast<int64_t>(p[3 + 2 * R]), axisStride = static_cast<int64_t>(p[4 + 2 * R]);
      const bool selectLast = static_cast<int64_t>(p[6 + 2 * R]) < 0;
      interp::Arg a;
      a.dtype = spec.in;
      a.shape = kiln::Shape{len};
      a.strides[0] = axisStride;
      for (uint64_t o = 0; o < p[2]; ++o) {
        int64_t base;
        positionOffsets(o, 3, 1, &base);
        a.data = reinterpret_cast<const char*>(p[1]) + base * static_cast<int64_t>(size);
        interp::argReduceKernel(spec.op, a, 0, selectLast, out + o * 8);
      }
      return;
    }
    if (spec.family == Family::Take) {
      // No reference kernel has this form: the kernel's own definition
      // (Tier0Kernels.h), with the index checked against nothing (Kiln checks
      // indices on the host before it launches).
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      const char* x = reinterpret_cast<const char*>(p[1]);
      const auto* index = reinterpret_cast<const int64_t*>(p[2]);
      for (uint64_t lin = 0; lin < p[3]; ++lin) {
        int64_t off[2];
        positionOffsets(lin, 4, 2, off);
        const int64_t xoff = off[0] + index[off[1]] * static_cast<int64_t>(p[4 + 3 * R]);
        std::memcpy(out + lin * size, x + xoff * static_cast<int64_t>(size), size);
      }
      return;
    }
    if (spec.family == Family::IndexAdd) {
      // The kernel's definition (Tier0Kernels.h): each position of a row
      // walks the index in order, each addition the reference kernel's.
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      const char* source = reinterpret_cast<const char*>(p[1]);
      const auto* index = reinterpret_cast<const int64_t*>(p[2]);
      const auto count = static_cast<int64_t>(p[4 + 3 * R]), outAxis = static_cast<int64_t>(p[5 + 3 * R]),
                 sourceAxis = static_cast<int64_t>(p[6 + 3 * R]);
      for (uint64_t lin = 0; lin < p[3]; ++lin) {
        int64_t off[2];  // out's, source's
        positionOffsets(lin, 4, 2, off);
        for (int64_t j = 0; j < count; ++j)
          addElement(out + (off[0] + index[j] * outAxis) * static_cast<int64_t>(size),
                     source + (off[1] + j * sourceAxis) * static_cast<int64_t>(size));
      }
      return;
    }
    if (spec.family == Family::IndexAddRows) {
      // The kernel's definition (Tier0Kernels.h): thread i owns position
      // i % rowN of target row table[i / rowN] and adds that target's
      // listed source rows in order, each addition the reference kernel's.
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      const char* source = reinterpret_cast<const char*>(p[1]);
      const auto* table = reinterpret_cast<const int64_t*>(p[2]);
      const auto rowN = static_cast<int64_t>(p[4 + 3 * R]), groups = static_cast<int64_t>(p[5 + 3 * R]),
                 outAxis = static_cast<int64_t>(p[6 + 3 * R]), sourceAxis = static_cast<int64_t>(p[7 + 3 * R]);
      const int64_t* starts = table + groups;
      const int64_t* rows = table + 2 * groups + 1;
      for (uint64_t i = 0; i < p[3]; ++i) {
        const auto g = static_cast<int64_t>(i) / rowN;
        int64_t off[2];  // out's, source's
        positionOffsets(static_cast<uint64_t>(static_cast<int64_t>(i) % rowN), 4, 2, off);
        char* dst = out + (off[0] + table[g] * outAxis) * static_cast<int64_t>(size);
        for (int64_t k = starts[g]; k < starts[g + 1]; ++k)
          addElement(dst, source + (off[1] + rows[k] * sourceAxis) * static_cast<int64_t>(size));
      }
      return;
    }
    if (spec.family == Family::Reduce || spec.family == Family::WarpReduce) {
      // Each output element: the reference reduction of its m elements
      // (a rank-kRank view reduced over every axis); a warp per output
      // computes the same, in another order.
      constexpr int R = kiln::hal::tier0::kRank;
      const std::size_t size = kiln::dtype_size(spec.in);
      std::vector<int64_t> red(R);
      for (int d = 0; d < R; ++d) red[d] = static_cast<int64_t>(p[20 + d]);
      interp::Arg a;
      a.dtype = spec.in;
      a.shape = kiln::Shape(red);
      for (int d = 0; d < R; ++d) a.strides[d] = static_cast<int64_t>(p[28 + d]);
      for (uint64_t o = 0; o < p[2]; ++o) {
        int64_t base;
        positionOffsets(o, 3, 1, &base);
        a.data = reinterpret_cast<const char*>(p[1]) + base * static_cast<int64_t>(size);
        interp::reduceKernel(spec.op, a, (1u << R) - 1, out + o * size);
      }
      return;
    }
    const auto n = static_cast<int64_t>(p[1 + spec.inputCount()]);
    const kiln::Shape s = shape(n);
    switch (spec.family) {
      case Family::Unary: interp::unaryKernel(spec.op, input(0, spec.in, s), out); break;
      case Family::Binary: interp::binaryKernel(spec.op, input(0, spec.in, s), input(1, spec.in, s), s, out); break;
      case Family::Compare: interp::compareKernel(spec.op, input(0, spec.in, s), input(1, spec.in, s), s, out); break;
      case Family::Where:
        interp::whereKernel(input(0, kiln::DType::boolean, s), input(1, spec.in, s), input(2, spec.in, s), s, out);
        break;
      case Family::Cast: interp::castKernel(input(0, spec.in, s), spec.out, out); break;
      case Family::Copy: {
        int64_t outStrides[kiln::Shape::kMaxRank] = {};
        strides(0, outStrides);
        interp::copyIntoKernel(input(0, spec.in, s), out, outStrides);
        break;
      }
      default: break;
    }
  }
};

/// KILN_FAKE_CUDA_PTXAS=<ptxas>: a compiled module loads only if ptxas
/// assembles it for the device's SM (as the real driver's JIT would have to);
/// `*log` receives ptxas's output when it does not. True without the variable.
bool ptxasAccepts(const std::string& ptx, int sm, std::string* log) {
  const char* ptxas = std::getenv("KILN_FAKE_CUDA_PTXAS");
  if (!ptxas || !*ptxas) return true;
  char path[] = "/tmp/kiln-fake-cuda-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return true;  // nowhere to check it: not the kernel's fault
  const bool written = ::write(fd, ptx.data(), ptx.size()) == static_cast<ssize_t>(ptx.size());
  ::close(fd);
  const std::string out = std::string(path) + ".log";
  const std::string cmd = std::string(ptxas) + " -arch=sm_" + std::to_string(sm) + " " + path + " -o /dev/null > " +
                          out + " 2>&1";
  const bool ok = written && std::system(cmd.c_str()) == 0;
  if (!ok) {
    if (FILE* f = std::fopen(out.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f)) *log += buf;
      std::fclose(f);
    }
  }
  std::remove(path);
  std::remove(out.c_str());
  if (ok) ++global().ptxasChecked;
  return ok;
}

/// KILN_FAKE_CUDA_COMPILED=launch: modules of compiled traces load.
bool acceptsCompiledKernels() {
  static const bool accept = [] {
    const char* v = std::getenv("KILN_FAKE_CUDA_COMPILED");
    return v && std::string(v) == "launch";
  }();
  return accept;
}

void reject(const std::string& why) {
  ++global().rejected;
  enter("rejected-launch", why);
}

/// One kernel launch: the function, its shape and its 8-byte parameter
/// values (copied at the call, as the driver copies them).
struct KernelLaunch {
  Function* fn = nullptr;
  std::array<unsigned, 3> grid{}, block{};
  unsigned shared = 0;
  std::vector<uint64_t> values;
};

struct GraphNode {
  KernelLaunch launch;
};
struct Graph {
  std::vector<std::unique_ptr<GraphNode>> nodes;  ///< in the order they were added
};
/// An instantiated graph: its own copy of each node's launch (updated by
/// cuGraphExecKernelNodeSetParams), keyed by the graph's node.
struct GraphExec {
  std::vector<std::pair<GraphNode*, KernelLaunch>> nodes;
};

/// `fn`'s parameter values from a kernelParams array (8-byte parameters only).
CUresult copyParameters(const Function* fn, void** params, std::vector<uint64_t>* values) {
  values->clear();
  for (size_t i = 0; i < fn->params.size(); ++i) {
    if (fn->params[i] != 8) {
      reject(fn->name + ": parameter " + std::to_string(i) + " has " + std::to_string(fn->params[i]) +
             " bytes; the fake decodes 8-byte parameters only");
      return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t v = 0;
    std::memcpy(&v, params[i], 8);
    values->push_back(v);
  }
  return CUDA_SUCCESS;
}

/// Checks one launch (module loaded, stream of its context, shape within a
/// GPU's limits, pointer parameters inside live allocations) and enqueues
/// it on `s`: a tier-0 kernel runs its host reference, a compiled trace's
/// kernel only counts.
CUresult launchValues(KernelLaunch k, Stream* s) {
  Function* fn = k.fn;
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    if (!driver().modules.count(fn->module)) {
      reject(fn->name + ": its module was unloaded");
      return CUDA_ERROR_INVALID_HANDLE;
    }
  }
  if (!s || s->device != fn->module->device) {
    reject(fn->name + ": stream of another context");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const auto [gx, gy, gz] = k.grid;
  const auto [bx, by, bz] = k.block;
  if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bx == 0 || by == 0 ||
      bz == 0 || bx > 1024 || by > 1024 || bz > 64 || uint64_t{bx} * by * bz > 1024 || k.shared > 48 * 1024) {
    reject(fn->name + ": grid or block outside the limits");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (injected(&Global::launch)) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  std::vector<uint64_t>& values = k.values;
  auto spec = tier0Specs().find(fn->name);
  if (spec == tier0Specs().end()) {
    // A compiled trace's kernel (its module loaded with
    // KILN_FAKE_CUDA_COMPILED=launch): checked and ordered, not computed.
    for (size_t i = 0; i < values.size(); ++i)
      if (fn->pointer[i] && !s->device->live(values[i], 1)) {
        reject(fn->name + ": pointer parameter " + std::to_string(i) + " is not device memory of this context");
        return CUDA_ERROR_INVALID_VALUE;
      }
    ++global().compiledLaunches;
    // Logged with its parameter values, so a test can compare the launches
    // a graph makes with those of cuLaunchKernel.
    std::string detail = fn->name + " grid " + std::to_string(gx) + " " + std::to_string(gy) + " " + std::to_string(gz);
    for (uint64_t v : values) detail += " " + std::to_string(v);
    enter("compiled-launch", detail);
    s->enqueue([] { return CUDA_SUCCESS; });
    return CUDA_SUCCESS;
  }
  if (static_cast<int>(values.size()) != spec->second.paramCount()) {
    reject(fn->name + ": the PTX declares " + std::to_string(values.size()) + " parameters, the kernel list " +
           std::to_string(spec->second.paramCount()));
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Pointer parameters must be live allocations of this device.
  const int pointers = spec->second.isLeaf() ? 1 : 1 + spec->second.inputCount();
  for (int i = 0; i < pointers; ++i)
    if (!s->device->live(values[static_cast<size_t>(i)], 1)) {
      reject(fn->name + ": pointer parameter " + std::to_string(i) + " is not device memory of this context");
      return CUDA_ERROR_INVALID_VALUE;
    }
  const bool fault = injected(&Global::fault);
  Tier0Launch launch{spec->second, std::move(values)};
  Device* d = s->device;
  s->enqueue([d, launch, fault] {
    if (fault) {
      // The kernel fails (its output is not written) and, as on a GPU, the
      // context is unusable from then on.
      Global& g = global();
      std::lock_guard<std::mutex> lock(g.mutex);
      if (g.sticky == CUDA_SUCCESS) g.sticky = CUDA_ERROR_LAUNCH_FAILED;
      return CUDA_ERROR_LAUNCH_FAILED;
    }
    return onDevice(d, [&] { launch.run(); });
  });
  return CUDA_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------
// The Driver API.

extern "C" {

CUresult CUDAAPI cuInit(unsigned int flags) {
  if (CUresult r = enter("cuInit"); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  static std::once_flag once;
  std::call_once(once, [] {
    gDriver = new Driver();
    const int count = envInt("KILN_FAKE_CUDA_DEVICES", 1);
    const std::size_t capacity = static_cast<std::size_t>(envInt("KILN_FAKE_CUDA_MEMORY_MB", 1024)) << 20;
    for (int i = 0; i < count; ++i) {
      auto d = std::make_unique<Device>();
      d->index = i;
      d->sm = envInt("KILN_FAKE_CUDA_SM", 90);
      d->capacity = capacity;
      void* p = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      d->base = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
      d->legacy = std::make_unique<Stream>(d.get());
      gDriver->devices.push_back(std::move(d));
    }
    readFailEnv();
  });
  return gDriver ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** str) {
  switch (error) {
    case CUDA_SUCCESS: *str = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *str = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *str = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *str = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_DEVICE_UNAVAILABLE: *str = "CUDA_ERROR_DEVICE_UNAVAILABLE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *str = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_PTX: *str = "CUDA_ERROR_INVALID_PTX"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *str = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *str = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *str = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_READY: *str = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *str = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *str = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *str = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** str) {
  switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY: *str = "out of memory"; break;
    case CUDA_ERROR_DEVICE_UNAVAILABLE: *str = "CUDA-capable device(s) is/are busy or unavailable"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *str = "unspecified launch failure"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *str = "too many resources requested for launch"; break;
    case CUDA_ERROR_NOT_FOUND: *str = "named symbol not found"; break;
    case CUDA_ERROR_INVALID_VALUE: *str = "invalid argument"; break;
    default: return cuGetErrorName(error, str);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (CUresult r = enter("cuDeviceGetCount"); r != CUDA_SUCCESS) return r;
  if (!gDriver) return CUDA_ERROR_NOT_INITIALIZED;
  *count = static_cast<int>(driver().devices.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult r = enter("cuDeviceGet"); r != CUDA_SUCCESS) return r;
  if (ordinal < 0 || ordinal >= static_cast<int>(driver().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = enter("cuDeviceGetName"); r != CUDA_SUCCESS) return r;
  std::snprintf(name, static_cast<size_t>(len), "Kiln fake CUDA device %d (host memory, no GPU)", dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult r = enter("cuDeviceGetAttribute"); r != CUDA_SUCCESS) return r;
  const int sm = driver().devices[static_cast<size_t>(dev)]->sm;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = sm / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = sm % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (CUresult r = enter("cuDeviceTotalMem_v2"); r != CUDA_SUCCESS) return r;
  *bytes = driver().devices[static_cast<size_t>(dev)]->capacity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult r = enter("cuDevicePrimaryCtxRetain"); r != CUDA_SUCCESS) return r;
  if (dev < 0 || dev >= static_cast<int>(driver().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = reinterpret_cast<CUcontext>(driver().devices[static_cast<size_t>(dev)].get());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return enter("cuDevicePrimaryCtxRelease_v2"); }

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  // Not logged: Kiln sets its context before every call.
  tCurrent = deviceOf(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize() {
  if (CUresult r = enter("cuCtxSynchronize"); r != CUDA_SUCCESS) return r;
  if (!tCurrent) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult first = tCurrent->legacy->synchronize();
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(tCurrent->mutex);
    streams.assign(tCurrent->streams.begin(), tCurrent->streams.end());
  }
  for (Stream* s : streams)
    if (CUresult r = s->synchronize(); r != CUDA_SUCCESS && first == CUDA_SUCCESS) first = r;
  return first;
}

CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (CUresult r = enter("cuStreamCreate"); r != CUDA_SUCCESS) return r;
  if (!tCurrent) return CUDA_ERROR_INVALID_CONTEXT;
  auto* s = new Stream(tCurrent);
  {
    std::lock_guard<std::mutex> lock(tCurrent->mutex);
    tCurrent->streams.insert(s);
  }
  *stream = reinterpret_cast<CUstream>(s);
  (void)flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream stream) {
  enter("cuStreamDestroy_v2");
  Stream* s = reinterpret_cast<Stream*>(stream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  s->synchronize();
  {
    std::lock_guard<std::mutex> lock(s->device->mutex);
    s->device->streams.erase(s);
  }
  {
    std::lock_guard<std::mutex> lock(gEventsMutex);
    for (Event* e : gEvents)
      if (e->stream == s) e->stream = nullptr;
  }
  delete s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream stream) {
  if (CUresult r = enter("cuStreamSynchronize"); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return s->synchronize();
}

CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
  if (CUresult r = enter("cuEventCreate"); r != CUDA_SUCCESS) return r;
  auto* e = new Event();
  {
    std::lock_guard<std::mutex> lock(gEventsMutex);
    gEvents.insert(e);
  }
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent event) {
  enter("cuEventDestroy_v2");
  {
    std::lock_guard<std::mutex> lock(gEventsMutex);
    gEvents.erase(reinterpret_cast<Event*>(event));
  }
  delete reinterpret_cast<Event*>(event);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent event, CUstream stream) {
  if (CUresult r = enter("cuEventRecord"); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  if (!s || !event) return CUDA_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(event);
  std::lock_guard<std::mutex> lock(s->mutex);
  e->stream = s;
  e->id = s->enqueued;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent event) {
  if (CUresult r = enter("cuEventQuery"); r != CUDA_SUCCESS) return r;
  auto* e = reinterpret_cast<Event*>(event);
  std::lock_guard<std::mutex> events(gEventsMutex);  // the stream is not destroyed meanwhile
  if (!e->stream) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(e->stream->mutex);
  return e->stream->completed >= e->id ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent event) {
  if (CUresult r = enter("cuEventSynchronize"); r != CUDA_SUCCESS) return r;
  auto* e = reinterpret_cast<Event*>(event);
  if (e->stream) e->stream->waitFor(e->id);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (CUresult r = enter("cuStreamWaitEvent"); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  auto* e = reinterpret_cast<Event*>(event);
  if (!s || !e) return CUDA_ERROR_INVALID_HANDLE;
  Stream* waitOn = e->stream;
  const uint64_t id = e->id;  // the record before this call, as on a GPU
  if (waitOn && waitOn != s)
    s->enqueue([waitOn, id] {
      waitOn->waitFor(id);
      return CUDA_SUCCESS;
    });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* userData) {
  if (CUresult r = enter("cuLaunchHostFunc"); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  if (!s || !fn) return CUDA_ERROR_INVALID_HANDLE;
  // Host functions run with device memory closed: touching it faults.
  s->enqueue([fn, userData] {
    fn(userData);
    return CUDA_SUCCESS;
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  if (CUresult r = enter("cuMemAlloc_v2", std::to_string(bytes)); r != CUDA_SUCCESS) return r;
  Device* d = tCurrent;
  if (!d) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (injected(&Global::oom)) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::size_t size = roundUp(bytes, kAlign);
  std::lock_guard<std::mutex> lock(d->mutex);
  uintptr_t at = 0;
  for (auto it = d->holes.begin(); it != d->holes.end(); ++it) {
    if (it->second < size) continue;
    at = it->first;
    const std::size_t rest = it->second - size;
    d->holes.erase(it);
    if (rest) d->holes[at + size] = rest;
    break;
  }
  if (!at) {
    if (!d->base || d->top + size > d->capacity) return CUDA_ERROR_OUT_OF_MEMORY;
    at = reinterpret_cast<uintptr_t>(d->base) + d->top;
    const std::size_t oldTop = d->top;
    d->top += size;
    if (d->openCount > 0) d->protect(oldTop, d->top, true);
  }
  d->allocations[at] = size;
  d->allocated += size;
  *dptr = at;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  if (CUresult r = enter("cuMemFree_v2"); r != CUDA_SUCCESS) return r;
  Device* d = deviceOfPointer(dptr);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  // cuMemFree waits for the device's work, as the real one may.
  d->legacy->synchronize();
  std::lock_guard<std::mutex> lock(d->mutex);
  auto it = d->allocations.find(dptr);
  if (it == d->allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  std::size_t size = it->second;
  d->allocated -= size;
  d->allocations.erase(it);
  uintptr_t at = dptr;
  // Coalesce with neighbouring holes.
  auto next = d->holes.find(at + size);
  if (next != d->holes.end()) {
    size += next->second;
    d->holes.erase(next);
  }
  auto prev = d->holes.lower_bound(at);
  if (prev != d->holes.begin()) {
    --prev;
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      d->holes.erase(prev);
    }
  }
  d->holes[at] = size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* freeBytes, size_t* total) {
  if (CUresult r = enter("cuMemGetInfo_v2"); r != CUDA_SUCCESS) return r;
  Device* d = tCurrent;
  if (!d) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(d->mutex);
  *total = d->capacity;
  *freeBytes = d->capacity - d->allocated;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytes, unsigned int) {
  if (CUresult r = enter("cuMemHostAlloc", std::to_string(bytes)); r != CUDA_SUCCESS) return r;
  void* p = std::aligned_alloc(kPage, roundUp(std::max<size_t>(bytes, 1), kPage));
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(driver().mutex);
  driver().pinned.insert(p);
  driver().pinnedRanges[reinterpret_cast<uintptr_t>(p)] = bytes;
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  enter("cuMemFreeHost");
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    if (!driver().pinned.erase(p)) return CUDA_ERROR_INVALID_VALUE;
    driver().pinnedRanges.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (CUresult r = enter("cuPointerGetAttribute"); r != CUDA_SUCCESS) return r;
  if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_INVALID_VALUE;
  if (Device* d = deviceOfPointer(ptr); d && d->live(ptr, 1)) {
    *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
    return CUDA_SUCCESS;
  }
  if (isPinned(reinterpret_cast<const void*>(ptr))) {
    *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;  // pageable host memory, as the driver says
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (CUresult r = enter("cuMemcpyHtoDAsync_v2", std::to_string(bytes)); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  Device* d = deviceOfPointer(dst);
  if (!s || !d || !d->live(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (isPinned(src)) {
    s->enqueue([d, dst, src, bytes] {
      return onDevice(d, [&] { std::memcpy(reinterpret_cast<void*>(dst), src, bytes); });
    });
  } else {
    // Pageable memory: staged at the call, as the driver does.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    s->enqueue([d, dst, staged, bytes] {
      return onDevice(d, [&] { std::memcpy(reinterpret_cast<void*>(dst), staged->data(), bytes); });
    });
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = enter("cuMemcpyDtoHAsync_v2", std::to_string(bytes)); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  Device* d = deviceOfPointer(src);
  if (!s || !d || !d->live(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  s->enqueue([d, dst, src, bytes] {
    return onDevice(d, [&] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = enter("cuMemcpyDtoDAsync_v2", std::to_string(bytes)); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  Device* d = deviceOfPointer(dst);
  Device* from = deviceOfPointer(src);
  if (!s || !d || d != from || !d->live(dst, bytes) || !d->live(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  s->enqueue([d, dst, src, bytes] {
    return onDevice(d, [&] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes); });
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  if (CUresult r = enter("cuMemsetD8Async", std::to_string(n)); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  Device* d = deviceOfPointer(dst);
  if (!s || !d || !d->live(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  s->enqueue([d, dst, value, n] { return onDevice(d, [&] { std::memset(reinterpret_cast<void*>(dst), value, n); }); });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream stream) {
  if (CUresult r = enter("cuMemsetD32Async", std::to_string(n)); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(stream);
  Device* d = deviceOfPointer(dst);
  if (!s || !d || !d->live(dst, n * 4) || dst % 4) return CUDA_ERROR_INVALID_VALUE;
  s->enqueue([d, dst, value, n] {
    return onDevice(d, [&] {
      auto* p = reinterpret_cast<unsigned int*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = value;
    });
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult r = enter("cuModuleLoadData"); r != CUDA_SUCCESS) return r;
  if (!tCurrent || !image) return CUDA_ERROR_INVALID_VALUE;
  auto m = std::make_unique<Module>();
  m->device = tCurrent;
  m->ptx = static_cast<const char*>(image);
  if (!parsePtx(m->ptx, tCurrent->sm, &m->entries)) return CUDA_ERROR_INVALID_PTX;
  bool compiled = false;
  for (const auto& [name, sig] : m->entries) {
    if (tier0Specs().count(name)) continue;
    compiled = true;
    if (!acceptsCompiledKernels()) {
      enter("refused-module", name + ": a compiled kernel; the fake runs only tier-0 kernels "
                              "(KILN_FAKE_CUDA_COMPILED=launch loads such modules and launches them without computing)");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  if (compiled) {
    std::string log;
    if (!ptxasAccepts(m->ptx, tCurrent->sm, &log)) {
      enter("refused-module", "ptxas rejected a compiled module: " + log);
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  std::lock_guard<std::mutex> lock(driver().mutex);
  driver().modules.insert(m.get());
  *module = reinterpret_cast<CUmodule>(m.release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  enter("cuModuleUnload");
  auto* m = reinterpret_cast<Module*>(module);
  std::lock_guard<std::mutex> lock(driver().mutex);
  if (!driver().modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  delete m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  if (CUresult r = enter("cuModuleGetFunction", name); r != CUDA_SUCCESS) return r;
  auto* m = reinterpret_cast<Module*>(module);
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    if (!driver().modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  }
  auto it = m->entries.find(name);
  if (it == m->entries.end()) return CUDA_ERROR_NOT_FOUND;
  // Lives as long as the process.
  *f = reinterpret_cast<CUfunction>(new Function{m, name, it->second.params, it->second.pointer});
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int sharedBytes, CUstream stream,
                                void** params, void** extra) {
  auto* fn = reinterpret_cast<Function*>(f);
  if (CUresult r = enter("cuLaunchKernel", fn ? fn->name : "(null)"); r != CUDA_SUCCESS) return r;
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (extra || (!fn->params.empty() && !params)) {
    reject(fn->name + ": parameters missing");
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<uint64_t> values;
  if (CUresult r = copyParameters(fn, params, &values); r != CUDA_SUCCESS) return r;
  return launchValues(KernelLaunch{fn, {gx, gy, gz}, {bx, by, bz}, sharedBytes, std::move(values)}, streamOf(stream));
}

// ---------------------------------------------------------------------------
// Graphs of kernel nodes.

CUresult CUDAAPI cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (CUresult r = enter("cuGraphCreate"); r != CUDA_SUCCESS) return r;
  if (!graph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(new Graph());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS* p) {
  auto* g = reinterpret_cast<Graph*>(graph);
  auto* fn = p ? reinterpret_cast<Function*>(p->func) : nullptr;
  if (CUresult r = enter("cuGraphAddKernelNode_v2", fn ? fn->name : "(null)"); r != CUDA_SUCCESS) return r;
  if (!node || !g || !fn || p->extra || (!fn->params.empty() && !p->kernelParams) ||
      (numDependencies > 0 && !dependencies))
    return CUDA_ERROR_INVALID_VALUE;
  // Dependencies must be nodes of this graph (which are always added after
  // theirs, so the order of addition is an order the graph may run in).
  for (size_t i = 0; i < numDependencies; ++i) {
    auto* dep = reinterpret_cast<GraphNode*>(dependencies[i]);
    if (std::find_if(g->nodes.begin(), g->nodes.end(), [&](const auto& n) { return n.get() == dep; }) == g->nodes.end())
      return CUDA_ERROR_INVALID_VALUE;
  }
  auto n = std::make_unique<GraphNode>();
  n->launch = KernelLaunch{fn, {p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ},
                           p->sharedMemBytes, {}};
  if (CUresult r = copyParameters(fn, p->kernelParams, &n->launch.values); r != CUDA_SUCCESS) return r;
  *node = reinterpret_cast<CUgraphNode>(n.get());
  g->nodes.push_back(std::move(n));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  auto* g = reinterpret_cast<Graph*>(graph);
  if (CUresult r = enter("cuGraphInstantiateWithFlags"); r != CUDA_SUCCESS) return r;
  if (!exec || !g || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new GraphExec();
  for (const auto& n : g->nodes) e->nodes.push_back({n.get(), n->launch});
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS* p) {
  auto* e = reinterpret_cast<GraphExec*>(exec);
  auto* fn = p ? reinterpret_cast<Function*>(p->func) : nullptr;
  if (CUresult r = enter("cuGraphExecKernelNodeSetParams_v2", fn ? fn->name : "(null)"); r != CUDA_SUCCESS) return r;
  if (!e || !fn || p->extra || (!fn->params.empty() && !p->kernelParams)) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [from, launch] : e->nodes) {
    if (from != reinterpret_cast<GraphNode*>(node)) continue;
    // The driver lets the function change only within its context; Kiln
    // never changes it, so the fake refuses any change.
    if (launch.fn != fn) return CUDA_ERROR_INVALID_VALUE;
    std::vector<uint64_t> values;
    if (CUresult r = copyParameters(fn, p->kernelParams, &values); r != CUDA_SUCCESS) return r;
    launch = KernelLaunch{fn, {p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ},
                          p->sharedMemBytes, std::move(values)};
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;  // not a node of the exec's graph
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  auto* e = reinterpret_cast<GraphExec*>(exec);
  if (CUresult r = enter("cuGraphLaunch"); r != CUDA_SUCCESS) return r;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = streamOf(stream);
  // Each node as the launch it stands for, in the graph's order; the first
  // that fails fails the graph launch (the nodes before it are queued).
  for (const auto& node : e->nodes)
    if (CUresult r = launchValues(node.second, s); r != CUDA_SUCCESS) return r;
  ++global().graphLaunches;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  if (CUresult r = enter("cuGraphExecDestroy"); r != CUDA_SUCCESS) return r;
  delete reinterpret_cast<GraphExec*>(exec);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  if (CUresult r = enter("cuGraphDestroy"); r != CUDA_SUCCESS) return r;
  delete reinterpret_cast<Graph*>(graph);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Test hooks (FakeCuda.h).

int kiln_fake_cuda_inject(const char* kind, int skip, int times) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  const std::string k(kind);
  Fault f{skip, times};
  if (k == "oom") g.oom = f;
  else if (k == "launch") g.launch = f;
  else if (k == "fault") g.fault = f;
  else if (k == "lost") g.lostAfter = f;
  else return -1;
  return 0;
}

void kiln_fake_cuda_reset_faults() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.oom = g.launch = g.fault = g.lostAfter = Fault{};
  g.sticky = CUDA_SUCCESS;
}

size_t kiln_fake_cuda_calls(const char* name) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  auto it = g.counts.find(name);
  return it == g.counts.end() ? 0 : it->second;
}

const char* kiln_fake_cuda_log() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.logText.clear();
  for (const std::string& line : g.log) g.logText += line + "\n";
  return g.logText.c_str();
}

void kiln_fake_cuda_clear_log() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.log.clear();
}

size_t kiln_fake_cuda_bytes_allocated(int device) {
  if (!gDriver || device < 0 || device >= static_cast<int>(driver().devices.size())) return 0;
  Device& d = *driver().devices[static_cast<size_t>(device)];
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.allocated;
}

size_t kiln_fake_cuda_rejected_launches() { return global().rejected.load(); }

size_t kiln_fake_cuda_compiled_launches() { return global().compiledLaunches.load(); }

size_t kiln_fake_cuda_ptxas_checked() { return global().ptxasChecked.load(); }

size_t kiln_fake_cuda_graph_launches() { return global().graphLaunches.load(); }

int kiln_fake_cuda_enqueue_device_work(void* stream, void (*fn)(void*), void* data) {
  if (CUresult r = enter("kiln_fake_cuda_enqueue_device_work"); r != CUDA_SUCCESS) return r;
  Stream* s = streamOf(static_cast<CUstream>(stream));
  if (!s || !fn) return CUDA_ERROR_INVALID_HANDLE;
  Device* d = s->device;
  s->enqueue([d, fn, data] { return onDevice(d, [&] { fn(data); }); });
  return CUDA_SUCCESS;
}

}  // extern "C"
