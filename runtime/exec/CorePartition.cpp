#include "runtime/exec/CorePartition.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include <pthread.h>
#include <tbb/global_control.h>

namespace kiln::exec {

namespace {

struct Partition {
  std::mutex mutex;
  size_t taken = 0;     ///< cores taken by every queue
  size_t baseline = 0;  ///< TBB's parallelism when none was taken
  size_t left = 0;      ///< the parallelism `control` leaves (0: no control)
  std::unique_ptr<tbb::global_control> control;
  std::atomic<bool> active{false};
  std::atomic<uint64_t> changes{0};

  /// Sets the TBB limit that `taken` asks for; called with `mutex` held.
  void apply() {
    // At least one core stays the user's; 0: no limit.
    const size_t want = taken > 0 && baseline > 1 ? (baseline > taken ? baseline - taken : 1) : 0;
    if (want == left) return;
    control.reset();
    if (want > 0) control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, want);
    left = want;
    active.store(want > 0, std::memory_order_relaxed);
    changes.fetch_add(1, std::memory_order_relaxed);
  }
};

void beforeFork();
void afterForkInParent();
void afterForkInChild();

/// Never destroyed: queues give cores back from exit handlers.
Partition& partition() {
  static Partition* p = [] {
    auto* fresh = new Partition;
    pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
    return fresh;
  }();
  return *p;
}

// The fork happens with the limit lifted, so that the child's TBB does not
// start with the parent's compile threads' cores held back from it.
void beforeFork() {
  Partition& p = partition();
  p.mutex.lock();
  p.control.reset();
}

void afterForkInParent() {
  Partition& p = partition();
  if (p.left > 0) p.control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, p.left);
  p.mutex.unlock();
}

void afterForkInChild() {
  Partition& p = partition();
  p.taken = 0;
  p.left = 0;
  p.active.store(false, std::memory_order_relaxed);
  p.mutex.unlock();
}

}  // namespace

void CorePartition::take(size_t cores) {
  if (cores == 0) return;
  Partition& p = partition();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.taken == 0)
    p.baseline = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  p.taken += cores;
  p.apply();
}

void CorePartition::giveBack(size_t cores) {
  if (cores == 0) return;
  Partition& p = partition();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.taken -= std::min(cores, p.taken);
  p.apply();
}

bool CorePartition::active() { return partition().active.load(std::memory_order_relaxed); }

uint64_t CorePartition::changes() { return partition().changes.load(std::memory_order_relaxed); }

}  // namespace kiln::exec
