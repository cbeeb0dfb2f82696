// TuningSession: tier 2's per-site decision (a pure state machine: no GEMM,
// no clock; the tests hand it times).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/exec/TuningSession.h"

namespace kiln::exec {
namespace {

constexpr TuningPolicy kPolicy{.warmCalls = 4, .rounds = 3, .minGain = 0.03};

/// Runs the session through every trial, answering `times[candidate]` (plus
/// `noise(round)`), and returns the candidates in the order they were tried.
template <class Noise>
std::vector<size_t> tryAll(TuningSession& s, const std::vector<double>& times, Noise noise) {
  std::vector<size_t> order;
  bool trial = false;
  for (int guard = 0; guard < 1000 && s.phase() != TuningSession::Phase::Decided; ++guard) {
    const size_t c = s.next(&trial);
    if (!trial) continue;
    order.push_back(c);
    s.report(c, times[c] + noise(order.size() - 1));
  }
  return order;
}
std::vector<size_t> tryAll(TuningSession& s, const std::vector<double>& times) {
  return tryAll(s, times, [](size_t) { return 0.0; });
}

TEST(TuningSession, RunsTheDefaultUntilTheSiteIsHot) {
  TuningSession s(3, kPolicy);
  bool trial = true;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.next(&trial), 0u);
    EXPECT_FALSE(trial);
    EXPECT_EQ(s.phase(), TuningSession::Phase::Warming);
  }
  s.next(&trial);  // the fourth call is the first trial
  EXPECT_TRUE(trial);
  EXPECT_EQ(s.phase(), TuningSession::Phase::Trying);
}

TEST(TuningSession, EachRoundTriesEveryCandidateFromAnotherStart) {
  TuningSession s(3, kPolicy);
  const std::vector<size_t> order = tryAll(s, {1.0, 1.0, 1.0});
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 1, 2, 0, 2, 0, 1}));
  EXPECT_EQ(s.trials(), 9u);
}

TEST(TuningSession, TheFastestCandidateWinsAndEveryLaterCallRunsIt) {
  TuningSession s(3, kPolicy);
  tryAll(s, {1.0, 0.8, 0.9});
  ASSERT_EQ(s.phase(), TuningSession::Phase::Decided);
  EXPECT_EQ(s.winner(), 1u);
  EXPECT_NEAR(s.gain(), 0.25, 1e-12);
  bool trial = true;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.next(&trial), 1u);
    EXPECT_FALSE(trial);
  }
}

TEST(TuningSession, TheDefaultStaysUnlessBeatenByTheMargin) {
  TuningSession s(2, kPolicy);
  tryAll(s, {1.0, 0.98});  // 2 % faster: within a shared machine's noise
  EXPECT_EQ(s.winner(), 0u);
  EXPECT_EQ(s.gain(), 0.0);
}

TEST(TuningSession, OneSlowSpellDoesNotDecide) {
  // Candidate 0 is caught by a slow spell in one round; the median ignores it.
  TuningSession s(2, kPolicy);
  tryAll(s, {1.0, 1.1}, [](size_t trial) { return trial == 0 ? 5.0 : 0.0; });
  EXPECT_EQ(s.winner(), 0u);
}

TEST(TuningSession, FailedTrialsCountButGiveNoSample) {
  TuningSession s(2, kPolicy);
  bool trial = false;
  int reports = 0;
  while (s.phase() != TuningSession::Phase::Decided && reports < 100) {
    const size_t c = s.next(&trial);
    if (!trial) continue;
    ++reports;
    s.report(c, c == 1 ? -1.0 : 1.0);  // candidate 1 always fails
  }
  EXPECT_EQ(reports, 6);
  EXPECT_EQ(s.winner(), 0u);
}

TEST(TuningSession, WithoutATimeForTheDefaultNothingIsChosen) {
  TuningSession s(2, kPolicy);
  bool trial = false;
  while (s.phase() != TuningSession::Phase::Decided) {
    const size_t c = s.next(&trial);
    if (trial) s.report(c, c == 0 ? -1.0 : 0.5);
  }
  EXPECT_EQ(s.winner(), 0u);
}

TEST(TuningSession, CallsWhileTheLastTrialsAreOutRunTheDefault) {
  TuningSession s(2, TuningPolicy{.warmCalls = 1, .rounds = 1, .minGain = 0.03});
  bool trial = false;
  const size_t first = s.next(&trial), second = s.next(&trial);
  EXPECT_TRUE(trial);
  // Both trials are out (as on two threads); a third call is no trial.
  EXPECT_EQ(s.next(&trial), 0u);
  EXPECT_FALSE(trial);
  s.report(second, 0.5);
  EXPECT_EQ(s.phase(), TuningSession::Phase::Trying);
  s.report(first, 1.0);
  // Candidate 1 is the contender: one confirming pair, the default first.
  EXPECT_EQ(s.phase(), TuningSession::Phase::Trying);
  const size_t third = s.next(&trial);
  EXPECT_TRUE(trial);
  const size_t fourth = s.next(&trial);
  EXPECT_TRUE(trial);
  EXPECT_EQ(s.next(&trial), 0u);
  EXPECT_FALSE(trial) << "both confirming trials are out";
  EXPECT_EQ(third, 0u);
  EXPECT_EQ(fourth, 1u);
  s.report(fourth, 0.5);
  s.report(third, 1.0);
  EXPECT_EQ(s.phase(), TuningSession::Phase::Decided);
  EXPECT_EQ(s.winner(), 1u);
}

TEST(TuningSession, TheContenderAndTheDefaultThenAlternate) {
  TuningSession s(3, kPolicy);
  const std::vector<size_t> order = tryAll(s, {1.0, 0.8, 0.9});
  // The rotated rounds, then three confirming pairs in alternating order.
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(s.winner(), 1u);
}

TEST(TuningSession, AContenderFastByLuckIsNotConfirmed) {
  // Candidate 1 runs as fast as the default, but a quiet spell fell on all
  // three of its runs in the rounds (trials 1, 2 and 5: 0 1 | 1 0 | 0 1).
  TuningSession s(2, kPolicy);
  const std::vector<size_t> order =
      tryAll(s, {1.0, 1.0}, [](size_t trial) { return trial == 1 || trial == 2 || trial == 5 ? -0.1 : 0.0; });
  ASSERT_EQ(s.phase(), TuningSession::Phase::Decided);
  EXPECT_EQ(order.size(), 12u) << "6 trials in the rounds, 6 confirming";
  EXPECT_EQ(s.winner(), 0u);
  EXPECT_EQ(s.gain(), 0.0);
}

TEST(TuningSession, ADecidedSessionNeverTries) {
  TuningSession s = TuningSession::decided(4, 2);
  bool trial = true;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(s.next(&trial), 2u);
    EXPECT_FALSE(trial);
  }
  EXPECT_EQ(TuningSession::decided(4, 9).winner(), 0u);  // out of range: the default
}

TEST(TuningSession, OneCandidateIsDecidedFromTheStart) {
  TuningSession s(1, kPolicy);
  EXPECT_EQ(s.phase(), TuningSession::Phase::Decided);
  bool trial = true;
  EXPECT_EQ(s.next(&trial), 0u);
  EXPECT_FALSE(trial);
}

}  // namespace
}  // namespace kiln::exec
