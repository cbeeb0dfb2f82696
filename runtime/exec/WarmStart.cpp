#include "runtime/exec/WarmStart.h"

#include <sys/stat.h>
#include <unistd.h>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kiln/runtime.h"
#include "runtime/backends/Hal.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/support/Log.h"
#include "runtime/support/StatsCounters.h"

namespace kiln::exec {

namespace {
constexpr const char* kRecordHeader = "kiln-warm-start 1";
/// A record is a few dozen lines; anything larger is not one.
constexpr uint64_t kMaxRecordBytes = uint64_t{64} << 10;
/// A first step that needs more than this is not warmed beyond it.
constexpr std::size_t kMaxWarmBytes = std::size_t{4} << 30;

std::string realPath(const char* path) {
  char buf[PATH_MAX];
  return ::realpath(path, buf) ? std::string(buf) : std::string();
}

/// The bytes a warm-up may fault in: the record's total, within a quarter
/// of the machine's memory and kMaxWarmBytes.
std::size_t warmBudget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t quarter =
      pages > 0 && page > 0 ? static_cast<std::size_t>(pages) / 4 * static_cast<std::size_t>(page) : kMaxWarmBytes;
  return std::min(quarter, kMaxWarmBytes);
}
}  // namespace

WarmStart& WarmStart::instance() {
  static WarmStart* w = new WarmStart();  // never destroyed: joined at exit instead
  return *w;
}

std::string WarmStart::recordFileName() {
  static const std::string name = [] {
    std::string id = realPath("/proc/self/exe");
    // An interpreter runs many programs: its script tells them apart.
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string arg0, arg1;
    if (std::getline(in, arg0, '\0') && std::getline(in, arg1, '\0') && !arg1.empty() && arg1[0] != '-') {
      struct stat st;
      if (::stat(arg1.c_str(), &st) == 0 && S_ISREG(st.st_mode)) id += "\n" + realPath(arg1.c_str());
    }
    return "warmstart-" + cache::fingerprintDigest(id) + ".txt";
  }();
  return name;
}

std::string WarmStart::format(const WarmStartRecord& record) {
  std::ostringstream out;
  out << kRecordHeader << "\n";
  for (const hal::BlockDemand& b : record.blocks) out << "block " << b.bucket << " " << b.count << "\n";
  char hex[17];
  for (uint64_t k : record.kernels) {
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(k));
    out << "kernel " << hex << "\n";
  }
  return out.str();
}

std::optional<WarmStartRecord> WarmStart::parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kRecordHeader) return std::nullopt;
  WarmStartRecord r;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, rest;
    words >> kind;
    if (kind == "block") {
      unsigned long long bytes = 0, count = 0;
      if (!(words >> bytes >> count) || (words >> rest) || bytes == 0 || count == 0 || count > UINT32_MAX ||
          bytes > kMaxWarmBytes || hal::CachingHostAllocator::bucketSize(bytes) != bytes)
        return std::nullopt;
      r.blocks.push_back({static_cast<std::size_t>(bytes), static_cast<uint32_t>(count)});
    } else if (kind == "kernel") {
      std::string hex;
      if (!(words >> hex) || (words >> rest) || hex.size() != 16 ||
          hex.find_first_not_of("0123456789abcdef") != std::string::npos || r.kernels.size() == kMaxKernels)
        return std::nullopt;
      r.kernels.push_back(std::strtoull(hex.c_str(), nullptr, 16));
    } else {
      return std::nullopt;
    }
  }
  return r;
}

void WarmStart::beginOnce() {
  if (begun_.exchange(true)) return;
  const Settings& s = settings();
  if (s.cache == "off" || s.warm_start == "off") return;
  // The allocator exists before the exit handler is registered, so the
  // handler (which joins the threads that use it) runs before it goes.
  auto* allocator = dynamic_cast<hal::CachingHostAllocator*>(&hal::hostAllocator());
  if (!allocator) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (exiting_) return;
  static const bool registered = std::atexit(shutdown) == 0;
  if (!registered) return;
  allocator_.store(allocator);
  allocator->startDemandRecord();
  recording_.store(true);
  warmer_ = {std::thread([this] { warmUp(); }), ::getpid()};
}

void WarmStart::warmUp() {
  const auto t0 = std::chrono::steady_clock::now();
  KernelCache& cache = KernelCache::instance();
  const std::string dir = cache.usableDirectory();
  if (dir.empty()) return;
  std::string text, error;
  if (!cache::readFile(dir + "/" + recordFileName(), kMaxRecordBytes, &text, &error)) return;  // none yet
  const std::optional<WarmStartRecord> record = parse(text);
  if (!record) {
    log().warn("warm start: ignoring {}/{}: not a warm-start record", dir, recordFileName());
    return;
  }
  Counters& c = counters();
  // Kernels first: the first step needs its kernel before any memory.
  uint64_t kernels = 0;
  for (uint64_t hash : record->kernels) {
    trace::TraceKey key;
    key.hash = hash;
    kernels += cache.keyWordsOf(hash, Device::cpu(), KernelCache::Probe::Always, &key.words) &&
               cache.find(key, KernelCache::Probe::Always);
  }
  c.warmStartKernels.fetch_add(kernels, std::memory_order_relaxed);
  // The thread pool's workers start on its first parallel loop.
  tbb::parallel_for(0, tbb::this_task_arena::max_concurrency(), [](int) {});
  const std::size_t bytes = allocator_.load()->prefault(record->blocks, warmBudget());
  c.warmStartBytes.fetch_add(bytes, std::memory_order_relaxed);
  log().info("warm start: {} kernel(s) loaded and {:.1f} MB faulted in ahead of the first step in {:.1f} ms",
             kernels, static_cast<double>(bytes) / (1 << 20),
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void WarmStart::addKernel(uint64_t hash) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kernels_.size() < kMaxKernels && std::find(kernels_.begin(), kernels_.end(), hash) == kernels_.end())
    kernels_.push_back(hash);
}

void WarmStart::endRecord() {
  if (!recording_.exchange(false)) return;
  WarmStartRecord record{allocator_.load()->stopDemandRecord(), {}};
  std::lock_guard<std::mutex> lock(mutex_);
  record.kernels = std::move(kernels_);
  kernels_.clear();
  if (exiting_ || writer_.thread.joinable()) return;
  // Off the step's path: the file is written with fsyncs.
  writer_ = {std::thread([record = std::move(record)] {
               const std::string dir = KernelCache::instance().usableDirectory();
               if (!dir.empty()) store(dir, record);
             }),
             ::getpid()};
}

void WarmStart::store(const std::string& dir, const WarmStartRecord& record) {
  std::string text, error;
  if (cache::readFile(dir + "/" + recordFileName(), kMaxRecordBytes, &text, &error) && parse(text) == record) return;
  if (!cache::writeFileAtomic(dir, recordFileName(), format(record), &error))
    log().debug("warm start: could not store {}/{} ({})", dir, recordFileName(), error);
}

void WarmStart::joinThreads(bool exiting) {
  Worker workers[2];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exiting_ = exiting_ || exiting;
    workers[0] = std::move(warmer_);
    workers[1] = std::move(writer_);
  }
  for (Worker& w : workers) {
    if (!w.thread.joinable()) continue;
    if (::getpid() == w.pid) {
      w.thread.join();
    } else {
      // A forked child: the thread stayed in the parent, and the child's C
      // library took its stack back at the fork, so detaching it (as this
      // did) or joining it touches freed memory (a crash at exit). The
      // handle is left as it is, never destroyed.
      new std::thread(std::move(w.thread));
    }
  }
}

void WarmStart::join() { joinThreads(false); }

void WarmStart::shutdown() { instance().joinThreads(true); }

void WarmStart::resetForTesting() {
  if (recording_.exchange(false)) allocator_.load()->stopDemandRecord();
  join();
  std::lock_guard<std::mutex> lock(mutex_);
  kernels_.clear();
  begun_.store(false);
}

}  // namespace kiln::exec
