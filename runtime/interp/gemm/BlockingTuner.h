// The GEMM's seam for tier 2 (background tuning): a large parallel GEMM
// asks the installed tuner which of a few cache blockings to run, and reports
// how long a trial took. The engine installs its tuner (runtime/exec/Tuner.h)
// when libkiln loads; without one every call runs the default blocking.
#pragma once

#include <string>
#include <vector>

namespace kiln::interp::gemm {

class BlockingTuner {
 public:
  virtual ~BlockingTuner() = default;
  /// Which of `candidates` (names such as "mc=56 nc=1024"; candidate 0 is
  /// the micro-kernel's default) this call of `site` runs. Sets `*measure`
  /// when the call is a trial whose time must come back through report().
  virtual size_t choose(const std::string& site, const std::vector<std::string>& candidates, bool* measure) = 0;
  /// The wall time of a trial; seconds < 0 when the call failed (no sample).
  virtual void report(const std::string& site, size_t candidate, double seconds) = 0;
};

/// Installs `tuner` (null: none) for every later GEMM call of the process.
void setBlockingTuner(BlockingTuner* tuner);

/// GEMMs smaller than this many multiply-adds are not tuned: they fit one
/// cache block whatever the blocking, and timing them costs more than a
/// better blocking would save.
inline constexpr int64_t kTunedMultiplyAdds = int64_t{1} << 24;

}  // namespace kiln::interp::gemm
