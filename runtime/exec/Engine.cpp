#include "runtime/exec/Engine.h"

#include <chrono>

#include "runtime/exec/Log.h"
#include "runtime/exec/StatsCounters.h"

namespace kiln::exec {

namespace {
thread_local trace::TraceKey tLastKey;
thread_local std::vector<uint8_t> tNeeded;
thread_local std::vector<uint32_t> tLastUse;
}  // namespace

Engine& Engine::instance() {
  static Engine* e = new Engine();  // never destroyed: threads may flush at exit
  return *e;
}

const trace::TraceKey& Engine::lastKey() { return tLastKey; }

uint64_t Engine::runCount(const trace::TraceKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = profiles_.find(key);
  return it == profiles_.end() ? 0 : it->second.runs;
}

void Engine::run(const trace::Trace& trace, TraceResult& out) {
  auto start = std::chrono::steady_clock::now();
  trace.liveness(tNeeded, tLastUse);
  uint32_t needed = 0, neededOps = 0, paramCount = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const bool isParam = trace.nodes[i].op == core::OpKind::Param;
    paramCount += isParam;
    needed += tNeeded[i];
    neededOps += tNeeded[i] && !isParam;
  }
  Counters& c = counters();
  c.tracesRecorded.fetch_add(1, std::memory_order_relaxed);
  c.opsEliminated.fetch_add(trace.nodes.size() - paramCount - neededOps, std::memory_order_relaxed);

  tLastKey = trace::computeTraceKey(trace, tNeeded);
  uint64_t runs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = profiles_.try_emplace(tLastKey);
    if (inserted) {
      it->second.ops = needed;
      c.distinctTraceKeys.fetch_add(1, std::memory_order_relaxed);
    }
    runs = ++it->second.runs;
  }

  interpreter_.run(trace, tNeeded, tLastUse, out);
  c.interpretedRuns.fetch_add(1, std::memory_order_relaxed);
  c.interpretedOps.fetch_add(neededOps, std::memory_order_relaxed);
  if (log().should_log(spdlog::level::debug)) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    log().debug("trace {:016x}: {} nodes ({} needed), run #{}, interpreted in {:.3f} ms", tLastKey.hash,
                trace.nodes.size(), needed, runs, ms);
  }
}

}  // namespace kiln::exec
