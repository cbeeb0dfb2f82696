// TuningSession: tier 2's decision for one tuned call site (a GEMM shape),
// as a pure state machine over the candidates' measured times. The site
// runs its default until it has been called `warmCalls` times (it is hot);
// then each candidate runs `rounds` times, the rounds visiting the
// candidates in rotated orders so that a slow spell of a shared machine
// falls on different candidates. The candidate with the lowest median time
// is then only a contender: the fastest median of several noisy ones is
// fast partly by luck (on a shared 2-core Xeon two processes tuning the
// same 1024^3 SGEMM settled differently, one on a blocking "4.8 % faster"
// that ran slower). If it beats the default's median by at least `minGain`,
// it and the default run `rounds` more times each, alternating, and it wins
// only if these new samples, which chose nothing, still show the margin;
// every later call runs the winner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::exec {

struct TuningPolicy {
  uint64_t warmCalls = 16;
  int rounds = 3;
  double minGain = 0.03;
};

class TuningSession {
 public:
  enum class Phase { Warming, Trying, Decided };

  /// A site with `candidates` (>= 1) ways to run, candidate 0 the default.
  TuningSession(size_t candidates, TuningPolicy policy);
  /// A site decided without trials (a stored record, or a mode that does
  /// not try): every call runs `winner`.
  static TuningSession decided(size_t candidates, size_t winner);

  /// The candidate the next call runs; `*trial` says whether the call must
  /// report its time.
  size_t next(bool* trial);
  /// A trial's wall time; seconds < 0 for a trial that failed (no sample).
  /// The last trial's report decides.
  void report(size_t candidate, double seconds);

  Phase phase() const { return phase_; }
  size_t winner() const { return winner_; }
  /// The default's median time over the winner's in the confirming runs,
  /// minus 1 (0.07: the winner is 7 % faster); 0 when the default won or
  /// there were no trials.
  double gain() const { return gain_; }
  size_t candidates() const { return samples_.size(); }
  /// Trials handed out so far.
  size_t trials() const { return handed_; }

 private:
  /// Trials of the rotated rounds (every candidate `rounds` times).
  size_t roundTrials() const { return samples_.size() * static_cast<size_t>(policy_.rounds); }
  /// Trials handed out in all: the rounds, then the confirming runs once a
  /// contender is known.
  size_t plannedTrials() const { return roundTrials() + (contender_ ? 2 * static_cast<size_t>(policy_.rounds) : 0); }
  void chooseContender();
  void confirm();

  TuningPolicy policy_;
  Phase phase_ = Phase::Warming;
  uint64_t calls_ = 0;
  size_t handed_ = 0, reported_ = 0;
  std::vector<std::vector<double>> samples_;  // per candidate, from the rounds
  size_t contender_ = 0;                      // 0: none (yet)
  std::vector<double> confirming_[2];         // the default's and the contender's confirming runs
  size_t winner_ = 0;
  double gain_ = 0;
};

}  // namespace kiln::exec
