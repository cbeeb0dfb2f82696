// The process's id, cached: getpid() is a system call, and the runtime
// compares it on paths that run every step. A forked child sees its own
// (a pthread_atfork handler refreshes it). State that threads of this
// process serve (compile queues, compiles in flight) records the id it
// belongs to: a forked child has none of the parent's threads.
#pragma once

#include <sys/types.h>

namespace kiln::support {

pid_t processId();

}  // namespace kiln::support
