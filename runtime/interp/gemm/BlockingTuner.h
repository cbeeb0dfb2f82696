// The GEMMs' seam for tier 2 (background tuning): a large parallel GEMM
// lists the cache blockings it could run with, asks the installed tuner
// which to use, and reports how long a trial took. The engine installs its
// tuner (runtime/exec/Tuner.h) when libkiln loads; without one every call
// runs the default blocking. The f32 and bf16 drivers both call
// runWithTunedBlocking.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::interp::gemm {

class BlockingTuner {
 public:
  virtual ~BlockingTuner() = default;
  /// Which of `candidates` (names such as "mc=56 nc=1024" or "direct";
  /// candidate 0 is the micro-kernel's default) this call of `site` runs. Sets `*measure`
  /// when the call is a trial whose time must come back through report().
  virtual size_t choose(const std::string& site, const std::vector<std::string>& candidates, bool* measure) = 0;
  /// The wall time of a trial; seconds < 0 when the call failed (no sample).
  virtual void report(const std::string& site, size_t candidate, double seconds) = 0;
};

/// Installs `tuner` (null: none) for every later GEMM call of the process.
void setBlockingTuner(BlockingTuner* tuner);
BlockingTuner* installedBlockingTuner();

/// GEMMs smaller than this many multiply-adds are not tuned: they fit one
/// cache block whatever the blocking, and timing them costs more than a
/// better blocking would save.
inline constexpr int64_t kTunedMultiplyAdds = int64_t{1} << 24;

/// A product from kTunedDirectMultiplyAdds to kDirectTrialMultiplyAdds
/// multiply-adds whose operands the unpacked product takes also tries that
/// (Blocking::direct; below, it runs unpacked anyway, and smaller than
/// kTunedMultiplyAdds it tries only that). Packing costs such products a
/// share of their time that differs by CPU and shape: on a 2-core Zen 5,
/// 2 threads, unpacked ran 512x128x128 19 % faster, 512x512x128 12 %,
/// 256x512x512 5 %, but 1024x1024x64 6 % slower (KILN_TUNE=off
/// kiln_gemm_bench); a transformer training step's compiled run 2.65-2.8 ms
/// packed, 2.4-2.5 with all of them unpacked.
inline constexpr int64_t kTunedDirectMultiplyAdds = int64_t{1} << 20;
inline constexpr int64_t kDirectTrialMultiplyAdds = int64_t{1} << 26;

/// The row and column blocks of one call: the micro-kernel's, or a tuned
/// choice. Only these two vary, never the depth block: they decide which
/// tiles a thread computes and in what order, not the order of any sum, so
/// every blocking gives the same bits.
struct Blocking {
  int mc, nc;
  /// The product on unpacked operands instead (mc and nc unused): the same
  /// tiles and depth passes, so the same bits.
  bool direct = false;
};

/// The column block for N columns in blocks of at most `nc`: equal blocks
/// rather than full ones and a sliver, in whole multiples of `unit`.
int columnStep(int64_t N, int nc, int unit);

/// How an operand with strides (rs, cs) is laid out, as a site name says it:
/// "rows" (contiguous rows), "columns" or "strided".
inline const char* operandLayout(int64_t rs, int64_t cs) {
  return cs == 1 ? "rows" : rs == 1 ? "columns" : "strided";
}

/// A GEMM call as tier 2 sees it.
struct TunableCall {
  const char* kernel;  ///< "sgemm", "gemm_bf16"
  const char* isa;     ///< its micro-kernel's instruction set
  const char* aLayout;  ///< "rows", "columns", "strided": what picks the packing routines
  const char* bLayout;
  int64_t M, N, K;
  int threads;
  bool parallel;  ///< the caller owns the machine (not inside a parallel loop)
  Blocking byDefault;
  int mcUnit, ncUnit;  ///< what mc and nc must be multiples of
  /// The unpacked product takes its operands and it is at most
  /// kDirectTrialMultiplyAdds: a candidate too.
  bool directCandidate = false;
};

/// The default blocking first, then each mix of half, the same and twice
/// its row and column blocks, leaving out those that would run `call`
/// exactly as an earlier one does (only the default below
/// kTunedMultiplyAdds), then the unpacked product if it is a candidate.
std::vector<Blocking> candidateBlockings(const TunableCall& call);

/// Runs product(blocking) once: with the default blocking, or — for a call
/// tier 2 may tune (a tuner installed, `parallel`, at least
/// kTunedMultiplyAdds, or kTunedDirectMultiplyAdds for a direct candidate,
/// two or more distinct candidates) — with the blocking the tuner chooses,
/// timed when it asks.
template <class Product>
void runWithTunedBlocking(const TunableCall& call, Product&& product) {
  BlockingTuner* tuner = installedBlockingTuner();
  // Only the calls that own the machine are tuned: a GEMM inside a parallel
  // loop (a batch, a convolution's tiles) shares it with its siblings, so
  // its time says little about its blocking.
  const int64_t tunedFrom = call.directCandidate ? kTunedDirectMultiplyAdds : kTunedMultiplyAdds;
  if (!tuner || !call.parallel || call.M * call.N * call.K < tunedFrom) return product(call.byDefault);
  const std::vector<Blocking> blockings = candidateBlockings(call);
  if (blockings.size() < 2) return product(call.byDefault);
  std::vector<std::string> names;
  for (Blocking b : blockings)
    names.push_back(b.direct ? std::string("direct") : "mc=" + std::to_string(b.mc) + " nc=" + std::to_string(b.nc));
  // "sgemm avx512 2t 4096x4096x1024 a:rows b:rows": what decides the best
  // blocking of a call.
  const std::string site = std::string(call.kernel) + " " + call.isa + " " + std::to_string(call.threads) + "t " +
                           std::to_string(call.M) + "x" + std::to_string(call.N) + "x" + std::to_string(call.K) +
                           " a:" + call.aLayout + " b:" + call.bLayout;
  bool measure = false;
  const size_t chosen = std::min(tuner->choose(site, names, &measure), blockings.size() - 1);
  if (!measure) return product(blockings[chosen]);
  const auto start = std::chrono::steady_clock::now();
  try {
    product(blockings[chosen]);
  } catch (...) {
    tuner->report(site, chosen, -1.0);
    throw;
  }
  tuner->report(site, chosen, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace kiln::interp::gemm
