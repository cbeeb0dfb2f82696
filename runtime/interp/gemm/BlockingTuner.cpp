#include "runtime/interp/gemm/BlockingTuner.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace kiln::interp::gemm {

namespace {
std::atomic<BlockingTuner*> gTuner{nullptr};
}  // namespace

void setBlockingTuner(BlockingTuner* tuner) { gTuner.store(tuner); }

BlockingTuner* installedBlockingTuner() { return gTuner.load(std::memory_order_acquire); }

int columnStep(int64_t N, int nc, int unit) {
  const int64_t passes = (N + nc - 1) / nc;
  return static_cast<int>(((N + passes - 1) / passes + unit - 1) / unit * unit);
}

std::vector<Blocking> candidateBlockings(const TunableCall& call) {
  const Blocking d = call.byDefault;
  auto multiple = [](int value, int unit) { return std::max(unit, value / unit * unit); };
  const int mcs[] = {d.mc, multiple(d.mc / 2, call.mcUnit), multiple(d.mc * 2, call.mcUnit)};
  const int ncs[] = {d.nc, multiple(d.nc / 2, call.ncUnit), multiple(d.nc * 2, call.ncUnit)};
  const int64_t paddedM = (call.M + call.mcUnit - 1) / call.mcUnit * call.mcUnit;
  std::vector<Blocking> out;
  std::vector<std::pair<int64_t, int>> runsAs;  // (rows per A block, column step) of those listed
  const bool blockings = call.M * call.N * call.K >= kTunedMultiplyAdds;
  for (const int mc : mcs) {
    for (const int nc : ncs) {
      const std::pair<int64_t, int> plan{std::min<int64_t>(mc, paddedM), columnStep(call.N, nc, call.ncUnit)};
      if (std::find(runsAs.begin(), runsAs.end(), plan) != runsAs.end()) continue;
      if (!blockings && !out.empty()) continue;
      runsAs.push_back(plan);
      out.push_back({mc, nc});
    }
  }
  if (call.directCandidate) out.push_back({d.mc, d.nc, /*direct=*/true});
  return out;
}

}  // namespace kiln::interp::gemm
