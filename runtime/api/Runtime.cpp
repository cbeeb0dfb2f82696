// Trace boundaries of the public API.
#include "kiln/runtime.h"
#include "runtime/trace/Recorder.h"

namespace kiln {

void sync() {
  // The interpreter finishes its work before flush returns; compiled kernels
  // on asynchronous streams will be awaited here too.
  trace::Recorder::current().flush(trace::FlushReason::Sync);
}

void step() { trace::Recorder::current().flush(trace::FlushReason::Step); }

}  // namespace kiln
