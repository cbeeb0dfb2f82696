// CorePartition: the cores that compile threads hold back from the user's
// TBB threads, process-wide. Each CompileQueue (one per compile lane) takes
// cores while it holds one for its compile threads (an urgent job, or a
// spell of a background job's share: CompileQueue.h) and gives them back
// after. One tbb::global_control lowers the process's TBB parallelism by all
// the cores taken, from the parallelism it had while none was (at least one
// stays the user's): two lanes holding a core each take two, and neither
// lane's spell ending gives back the other's.
//
// Forks: the limit is lifted just before fork() and set again after it in
// the parent; a child starts with no core taken (its queues are new ones,
// CompileService.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::exec {

class CorePartition {
 public:
  /// Takes `cores` from the user's TBB threads (0: nothing).
  static void take(size_t cores);
  /// Gives back `cores` taken before (more than are taken: all of them).
  static void giveBack(size_t cores);
  /// Whether TBB's parallelism is lowered now.
  static bool active();
  /// How often the limit changed, process-wide: a timing that saw it change
  /// spans two numbers of threads.
  static uint64_t changes();
};

}  // namespace kiln::exec
