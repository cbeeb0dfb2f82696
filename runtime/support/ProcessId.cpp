#include "runtime/support/ProcessId.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace kiln::support {

namespace {
std::atomic<pid_t> gPid{0};

void refresh() { gPid.store(::getpid(), std::memory_order_relaxed); }
}  // namespace

pid_t processId() {
  static const bool registered = [] {
    refresh();
    pthread_atfork(nullptr, nullptr, refresh);
    return true;
  }();
  (void)registered;
  return gPid.load(std::memory_order_relaxed);
}

}  // namespace kiln::support
