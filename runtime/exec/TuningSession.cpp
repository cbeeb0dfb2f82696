#include "runtime/exec/TuningSession.h"

#include <algorithm>

namespace kiln::exec {

TuningSession::TuningSession(size_t candidates, TuningPolicy policy)
    : policy_(policy), samples_(std::max<size_t>(candidates, 1)) {
  if (samples_.size() == 1 || policy_.rounds < 1) phase_ = Phase::Decided;  // nothing to choose between
}

TuningSession TuningSession::decided(size_t candidates, size_t winner) {
  TuningSession s(candidates, TuningPolicy{});
  s.phase_ = Phase::Decided;
  s.winner_ = winner < s.samples_.size() ? winner : 0;
  return s;
}

size_t TuningSession::next(bool* trial) {
  *trial = false;
  if (phase_ == Phase::Warming && ++calls_ >= policy_.warmCalls) phase_ = Phase::Trying;
  if (phase_ != Phase::Trying) return winner_;
  const size_t n = samples_.size(), total = n * static_cast<size_t>(policy_.rounds);
  if (handed_ == total) return 0;  // every trial is out; the default until the last reports
  // Round r visits the candidates starting at r: 0 1 2 | 1 2 0 | 2 0 1 ...
  const size_t round = handed_ / n, candidate = (handed_ % n + round) % n;
  ++handed_;
  *trial = true;
  return candidate;
}

void TuningSession::report(size_t candidate, double seconds) {
  if (phase_ != Phase::Trying || candidate >= samples_.size()) return;
  if (seconds >= 0) samples_[candidate].push_back(seconds);
  if (++reported_ == samples_.size() * static_cast<size_t>(policy_.rounds)) decide();
}

namespace {
/// The median of `v` (the lower middle of an even count); < 0 when empty.
double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}
}  // namespace

void TuningSession::decide() {
  phase_ = Phase::Decided;
  winner_ = 0;
  gain_ = 0;
  const double base = median(samples_[0]);
  if (base <= 0) return;  // no time for the default: nothing to beat
  size_t best = 0;
  double bestTime = base;
  for (size_t i = 1; i < samples_.size(); ++i) {
    const double t = median(samples_[i]);
    if (t > 0 && t < bestTime) {
      best = i;
      bestTime = t;
    }
  }
  if (best != 0 && base / bestTime - 1.0 >= policy_.minGain) {
    winner_ = best;
    gain_ = base / bestTime - 1.0;
  }
}

}  // namespace kiln::exec
