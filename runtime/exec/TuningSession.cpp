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
  // Every trial is out: the default until the last reports (and, after the
  // rounds, until they have named a contender or decided).
  if (handed_ == plannedTrials()) return 0;
  const size_t n = samples_.size();
  size_t candidate;
  if (handed_ < roundTrials()) {
    // Round r visits the candidates starting at r: 0 1 2 | 1 2 0 | 2 0 1 ...
    const size_t round = handed_ / n;
    candidate = (handed_ % n + round) % n;
  } else {
    // Confirming pairs, their order alternating: 0 c | c 0 | 0 c ...
    const size_t k = handed_ - roundTrials();
    const bool defaultFirst = (k / 2) % 2 == 0;
    candidate = (k % 2 == 0) == defaultFirst ? 0 : contender_;
  }
  ++handed_;
  *trial = true;
  return candidate;
}

void TuningSession::report(size_t candidate, double seconds) {
  if (phase_ != Phase::Trying || candidate >= samples_.size()) return;
  if (!contender_) {
    if (seconds >= 0) samples_[candidate].push_back(seconds);
    if (++reported_ == roundTrials()) chooseContender();
    return;
  }
  if (seconds >= 0 && (candidate == 0 || candidate == contender_))
    confirming_[candidate == 0 ? 0 : 1].push_back(seconds);
  if (++reported_ == plannedTrials()) confirm();
}

namespace {
/// The median of `v` (the lower middle of an even count); < 0 when empty.
double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}
}  // namespace

void TuningSession::chooseContender() {
  const double base = median(samples_[0]);
  size_t best = 0;
  double bestTime = base;
  for (size_t i = 1; base > 0 && i < samples_.size(); ++i) {
    const double t = median(samples_[i]);
    if (t > 0 && t < bestTime) {
      best = i;
      bestTime = t;
    }
  }
  // No time for the default: nothing to beat.
  if (best == 0 || base / bestTime - 1.0 < policy_.minGain) {
    phase_ = Phase::Decided;
    return;
  }
  contender_ = best;  // confirming runs follow (next)
}

void TuningSession::confirm() {
  phase_ = Phase::Decided;
  const double base = median(confirming_[0]), time = median(confirming_[1]);
  if (base > 0 && time > 0 && base / time - 1.0 >= policy_.minGain) {
    winner_ = contender_;
    gain_ = base / time - 1.0;
  }
}

}  // namespace kiln::exec
