#include "runtime/exec/CompileService.h"

#include <chrono>
#include <system_error>

#include "runtime/cache/KernelCache.h"
#include "runtime/support/Log.h"
#include "runtime/support/ProcessId.h"
#include "kiln/runtime.h"

namespace kiln::exec {

CompileQueue& CompileService::queue(Lane lane) {
  const int i = static_cast<int>(lane);
  if (CompileQueue* q = ownQueue(i)) return *q;
  std::lock_guard<std::mutex> lock(createMutex_);
  if (CompileQueue* q = ownQueue(i)) return *q;
  const int threads = lane == Lane::Traces ? settings().compile_threads : 1;
  auto* q = new CompileQueue(threads, settings().compile_share);
  queues_[i].store(q);
  return *q;
}

CompileQueue* CompileService::ownQueue(int lane) const {
  CompileQueue* q = queues_[lane].load();
  return q && q->owner() == support::processId() ? q : nullptr;
}

void CompileService::submit(Lane lane, bool now, std::function<void()> job, JobRank rank) {
  if (now) {
    job();
    return;
  }
  CompileQueue* q = nullptr;
  try {
    q = &queue(lane);
  } catch (const std::system_error& e) {
    // No compile thread could start (a process or cgroup limit on
    // threads): the job runs now, in the caller's thread, as in sync mode,
    // rather than failing the step that asked for it. A later submit tries
    // to start the threads again.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log().warn("could not start a compile thread ({}): compiling in the calling thread", e.what());
    job();
    return;
  }
  prepareBackgroundCompile();
  q->push(std::move(job), rank);
}

void CompileService::makeUrgent(Lane lane) {
  if (CompileQueue* q = ownQueue(static_cast<int>(lane))) q->makeUrgent();
}

BuiltKernel CompileService::kernelFor(const trace::TraceKey& key, const trace::TraceGraph& graph,
                                      const std::string& name, int dynamicSizes, CodegenEffort effort,
                                      const CompileResult* quick, std::function<void(std::size_t)> scratchKnown) {
  BuiltKernel built;
  built.executable = KernelCache::instance().find(key, KernelCache::Probe::Always);
  if (built.executable && built.executable->codegen == CodegenEffort::Quick && effort == CodegenEffort::Full)
    built.executable = nullptr;  // the Quick kernel this compile replaces
  built.fromCache = built.executable != nullptr;
  if (built.fromCache) return built;
  const bool fromQuick = effort == CodegenEffort::Full && quick && !quick->optimizedModules.empty();
  built.codegenOnly = fromQuick;
  built.result = fromQuick ? codegenTraceFull(graph, *quick, name)
                            : compileTrace(graph, name, effort, std::move(scratchKnown));
  if (built.result.ok() && dynamicSizes >= 0 && built.result.dynamicSizes != dynamicSizes) {
    built.result.object.clear();
    built.result.error = "the compiler did not produce a dynamic-shape kernel";
  }
  if (!built.result.ok()) return built;
  const auto t = std::chrono::steady_clock::now();
  built.executable = KernelCache::instance().install(key, graph, built.result, &built.result.error);
  built.result.timings.jitMs +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  return built;
}

void CompileService::drain() {
  for (int i = 0; i < 2; ++i)
    if (CompileQueue* p = ownQueue(i)) p->drain();
}

void CompileService::shutdown() {
  for (int i = 0; i < 2; ++i)
    if (CompileQueue* p = ownQueue(i)) p->shutdown();
}

}  // namespace kiln::exec
