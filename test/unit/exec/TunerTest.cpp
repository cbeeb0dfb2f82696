// Tier 2 on Kiln's real GEMM: a hot shape tries its blockings on real calls,
// every blocking gives the same bits, the winner is stored in the disk
// cache and taken from there by a later process, and KILN_TUNE=off and
// KILN_JIT=replay do what the README says.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "kiln/kiln.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/exec/Tuner.h"
#include "runtime/interp/gemm/Bf16Gemm.h"
#include "runtime/interp/gemm/BlockingTuner.h"
#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::exec {
namespace {

namespace fs = std::filesystem;
namespace gemm = interp::gemm;

// Large enough to be tuned, with a row and a column count that every
// candidate blocking splits differently.
constexpr int64_t kM = 600, kN = 2100, kK = 40;
static_assert(kM * kN * kK >= gemm::kTunedMultiplyAdds);

/// `n` pseudo-random floats in [-1, 1), a linear congruential sequence from `seed`.
std::vector<float> randomValues(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return v;
}

/// Row-major pseudo-random A[M, K] and B[K, N] (kM x kN x kK unless given).
struct Operands {
  int64_t M, N, K;
  std::vector<float> a, b;
  Operands(int64_t m = kM, int64_t n = kN, int64_t k = kK)
      : M(m), N(n), K(k), a(randomValues(m * k, 12345)), b(randomValues(k * n, 54321)) {}
  std::vector<float> product() const {
    std::vector<float> c(M * N, -7.0f);
    gemm::sgemm(M, N, K, {a.data(), K, 1}, {b.data(), N, 1}, c.data(), N, false, /*parallel=*/true);
    return c;
  }
};

/// A private cache directory, the tuner forgotten (a new process) and a
/// quick policy for each test; everything restored after.
class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "kiln-tuner-test-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    saved_ = settings();
    Settings s = saved_;
    s.cache = "on";
    s.cache_dir = dir_.string();
    s.tune = "on";
    set_settings(s);
    Tuner::instance().forget();
    Tuner::instance().setPolicy(TuningPolicy{.warmCalls = 2, .rounds = 1, .minGain = 0.03});
  }
  void TearDown() override {
    Tuner::instance().forget();
    Tuner::instance().setPolicy(TuningPolicy{});
    set_settings(saved_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void setMode(JitMode jit, const char* tune) {
    Settings s = settings();
    s.jit = jit;
    s.tune = tune;
    set_settings(s);
  }
  fs::path recordFile() const { return dir_ / Tuner::recordFileName(); }
  std::map<std::string, std::string> records() const {
    std::ifstream in(recordFile());
    std::stringstream text;
    text << in.rdbuf();
    std::map<std::string, std::string> r;
    EXPECT_EQ(Tuner::parseRecords(text.str(), &r), 0u);
    return r;
  }
  /// Runs `product` until the tuner has settled (at most `calls` times),
  /// checking that every call gives `expected`'s bits.
  void runUntilSettled(const std::function<std::vector<float>()>& product, const std::vector<float>& expected,
                       int calls = 64) {
    for (int i = 0; i < calls; ++i) {
      const Stats before = stats();
      const std::vector<float> c = product();
      ASSERT_EQ(std::memcmp(c.data(), expected.data(), sizeof(float) * c.size()), 0)
          << "call " << i << " (trials so far " << before.tune_trials << ") changed the product's bits";
      const Stats after = stats();
      if (after.tune_sites > 0 && after.tune_sites == after.tune_sites_settled) return;
    }
    FAIL() << "the tuner did not settle within " << calls << " calls:\n" << stats().str();
  }
  void runUntilSettled(const Operands& ops, const std::vector<float>& expected, int calls = 64) {
    runUntilSettled([&] { return ops.product(); }, expected, calls);
  }

  fs::path dir_;
  Settings saved_;
};

TEST_F(TunerTest, EveryBlockingGivesTheSameBitsAndTheChoiceIsStored) {
  const Operands ops;
  const Stats start = stats();
  const std::vector<float> first = ops.product();  // warming: the default blocking
  // The product against a plain loop, so that equal bits mean right bits.
  for (int64_t i = 0; i < kM; i += 97)
    for (int64_t j = 0; j < kN; j += 89) {
      double ref = 0;
      for (int64_t k = 0; k < kK; ++k) ref += double(ops.a[i * kK + k]) * double(ops.b[k * kN + j]);
      ASSERT_NEAR(first[i * kN + j], ref, 1e-4) << i << "," << j;
    }
  runUntilSettled(ops, first);
  const Stats end = stats();
  EXPECT_EQ(end.tune_sites - start.tune_sites, 1u);
  // Half, the same and twice the row and column blocks: 9 ways for this
  // shape, and the unpacked product (kDirectTrialMultiplyAdds) where the
  // ISA has one, one round each; then, if one of them was 3 % faster than
  // the default, one confirming pair.
  const uint64_t ways = 9 + (gemm::activeIsa() != gemm::Isa::scalar ? 1 : 0);
  const uint64_t trials = end.tune_trials - start.tune_trials;
  EXPECT_TRUE(trials == ways || trials == ways + 2) << end.str();
  EXPECT_EQ(end.tune_records_used, start.tune_records_used);

  const auto recorded = records();
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_NE(recorded.begin()->first.find(std::to_string(kM) + "x" + std::to_string(kN) + "x" + std::to_string(kK)),
            std::string::npos)
      << recorded.begin()->first;
  const std::string& choice = recorded.begin()->second;
  EXPECT_TRUE(choice.rfind("mc=", 0) == 0 || choice == "direct") << choice;
}

// A background compile takes a core from the user's threads and gives it
// back in spells (CompileQueue.h): a trial that spanned one timed its way
// on another number of threads, so it is no sample, and a site whose every
// trial did keeps its default, for this process only: no record is stored.
TEST_F(TunerTest, TrialsThatSawACompileTakeOrGiveBackACoreAreNotSamples) {
  if (tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism) < 2)
    GTEST_SKIP() << "one thread for TBB: no compile takes a core from it";
  const std::vector<std::string> ways{"default", "faster"};
  auto tune = [&](const std::string& site, bool spells) {
    CompileQueue queue(1, 25);
    for (int call = 0; call < 64; ++call) {
      bool measure = false;
      const size_t way = Tuner::instance().choose(site, ways, &measure);
      if (!measure) continue;
      if (spells) {  // a compile holds a core for the length of a job
        queue.push([] {}, JobRank::Urgent);
        queue.drain();
      }
      Tuner::instance().report(site, way, way == 1 ? 1e-3 : 1e-2);
    }
    bool measure = false;
    return Tuner::instance().choose(site, ways, &measure);
  };
  EXPECT_EQ(tune("steady machine", false), 1u) << "ten times faster in every trial";
  EXPECT_EQ(tune("spells", true), 0u) << "trials across a core taken and given back chose a way";
  const std::map<std::string, std::string> stored = records();
  EXPECT_EQ(stored.count("steady machine"), 1u);
  EXPECT_EQ(stored.count("spells"), 0u) << "a choice made without samples was stored";
}

/// A product too small for blockings to matter, but large enough that
/// packing is a CPU- and shape-dependent share of its time, tries only the
/// default blocking against the unpacked product; both give the same bits.
TEST_F(TunerTest, MidSizedProductsTryTheUnpackedProductAlone) {
  if (gemm::activeIsa() == gemm::Isa::scalar) GTEST_SKIP() << "the scalar kernel has no unpacked product";
  constexpr int64_t M = 512, N = 128, K = 128;  // a transformer layer's projection
  static_assert(M * N * K >= gemm::kTunedDirectMultiplyAdds && M * N * K < gemm::kTunedMultiplyAdds);
  const Operands ops(M, N, K);
  const Stats start = stats();
  const std::vector<float> first = ops.product();
  runUntilSettled(ops, first);
  const Stats end = stats();
  EXPECT_EQ(end.tune_sites - start.tune_sites, 1u) << end.str();
  EXPECT_EQ(end.tune_sites_settled - start.tune_sites_settled, 1u) << end.str();
  const uint64_t trials = end.tune_trials - start.tune_trials;
  EXPECT_TRUE(trials == 2u || trials == 4u) << "the default and the unpacked product; " << end.str();
  const auto recorded = records();
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_TRUE(recorded.begin()->second == "direct" || recorded.begin()->second.rfind("mc=", 0) == 0)
      << recorded.begin()->second;
}

/// A tuner that hands out its candidates in turn, timing nothing.
class EveryCandidateInTurn final : public gemm::BlockingTuner {
 public:
  size_t choose(const std::string&, const std::vector<std::string>& candidates, bool* measure) override {
    *measure = false;
    count = candidates.size();
    names = candidates;
    return next++ % candidates.size();
  }
  void report(const std::string&, size_t, double) override {}
  size_t next = 0, count = 0;
  std::vector<std::string> names;
};

/// Every candidate, the unpacked product included, gives the default's bits
/// on the layouts and paths the tuner meets: A and B row- or column-major,
/// accumulating into C, two depth passes (K > kc), the epilogue (a strided
/// bias and relu) on the last.
TEST(TunerCandidates, EveryWayToRunAProductGivesItsBits) {
  EveryCandidateInTurn stub;
  gemm::BlockingTuner* saved = gemm::installedBlockingTuner();
  gemm::setBlockingTuner(&stub);
  struct Restore {
    gemm::BlockingTuner* t;
    ~Restore() { gemm::setBlockingTuner(t); }
  } restore{saved};
  const int64_t kc = gemm::activeIsa() == gemm::Isa::avx512 ? 1024 : 256;
  const int64_t M = 150, N = 170, K = kc + 77;  // two depth passes, ragged tiles
  static_assert(150 * 170 * (1024 + 77) <= gemm::kDirectTrialMultiplyAdds);
  const Operands ops(M, N, K);
  const std::vector<float> &a = ops.a, &b = ops.b, bias = randomValues(2 * N, 99);
  gemm::Epilogue epilogue;
  epilogue.bias = bias.data();
  epilogue.biasStride = 2;
  epilogue.relu = true;
  for (bool columnMajorA : {false, true})
    for (bool columnMajorB : {false, true})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string(columnMajorA ? "A^T " : "") + (columnMajorB ? "B^T " : "") +
                     (accumulate ? "C+=" : "C="));
        const gemm::StridedMatrix am = columnMajorA ? gemm::StridedMatrix{a.data(), 1, M} : gemm::StridedMatrix{a.data(), K, 1};
        const gemm::StridedMatrix bm = columnMajorB ? gemm::StridedMatrix{b.data(), 1, K} : gemm::StridedMatrix{b.data(), N, 1};
        std::vector<float> first;
        stub.next = 0;
        stub.count = 0;
        for (size_t call = 0; call == 0 || call < stub.count; ++call) {
          std::vector<float> c(M * N, 0.25f);
          gemm::sgemm(M, N, K, am, bm, c.data(), N, accumulate, /*parallel=*/true, &epilogue);
          if (call == 0) first = c;
          else ASSERT_EQ(std::memcmp(c.data(), first.data(), sizeof(float) * c.size()), 0) << stub.names[call];
        }
        ASSERT_GE(stub.count, 2u) << "the product was not offered to the tuner";
        if (gemm::activeIsa() != gemm::Isa::scalar) {
          EXPECT_EQ(stub.names.back(), "direct");
        }
      }
}

TEST_F(TunerTest, ALaterProcessTakesTheRecordedChoiceWithoutTrials) {
  const Operands ops;
  const std::vector<float> first = ops.product();
  runUntilSettled(ops, first);
  ASSERT_TRUE(fs::exists(recordFile()));

  Tuner::instance().forget();  // a new process on the same cache
  const Stats before = stats();
  EXPECT_EQ(ops.product(), first);
  const Stats after = stats();
  EXPECT_EQ(after.tune_records_used - before.tune_records_used, 1u);
  EXPECT_EQ(after.tune_trials, before.tune_trials);
  EXPECT_EQ(after.tune_sites_settled - before.tune_sites_settled, 1u);
  for (int i = 0; i < 5; ++i) ops.product();
  EXPECT_EQ(stats().tune_trials, before.tune_trials);
}

TEST_F(TunerTest, ReplayUsesRecordsButStartsNoTrials) {
  const Operands ops;
  setMode(JitMode::Replay, "on");
  const Stats before = stats();
  const std::vector<float> first = ops.product();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ops.product(), first);
  EXPECT_EQ(stats().tune_trials, before.tune_trials);
  EXPECT_FALSE(fs::exists(recordFile()));

  // With a record (written by a tuning process), replay runs it.
  setMode(JitMode::Async, "on");
  Tuner::instance().forget();
  runUntilSettled(ops, first);
  setMode(JitMode::Replay, "on");
  Tuner::instance().forget();
  const Stats replay = stats();
  EXPECT_EQ(ops.product(), first);
  EXPECT_EQ(stats().tune_records_used - replay.tune_records_used, 1u);
}

TEST_F(TunerTest, TuneOffRunsTheDefaultAndReadsNoRecord) {
  const Operands ops;
  const std::vector<float> first = ops.product();
  runUntilSettled(ops, first);
  Tuner::instance().forget();
  setMode(JitMode::Async, "off");
  const Stats before = stats();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ops.product(), first);
  const Stats after = stats();
  EXPECT_EQ(after.tune_trials, before.tune_trials);
  EXPECT_EQ(after.tune_records_used, before.tune_records_used);
  EXPECT_EQ(after.tune_sites, before.tune_sites);
}

TEST_F(TunerTest, ARecordNamingNoCandidateIsTriedAnew) {
  const Operands ops;
  const std::vector<float> first = ops.product();
  runUntilSettled(ops, first);
  auto recorded = records();
  ASSERT_EQ(recorded.size(), 1u);
  recorded.begin()->second = "mc=13 nc=7";  // no such blocking (an older Kiln's, or damage)
  recorded["a site this process never sees"] = "mc=56 nc=1024";
  std::ofstream(recordFile()) << Tuner::formatRecords(recorded);

  Tuner::instance().forget();
  const Stats before = stats();
  runUntilSettled(ops, first);
  const Stats after = stats();
  EXPECT_EQ(after.tune_records_used, before.tune_records_used);
  EXPECT_GT(after.tune_trials, before.tune_trials);
  // The new decision replaced the stale record and kept the other site's.
  recorded = records();
  EXPECT_EQ(recorded.size(), 2u);
  for (const auto& [site, candidate] : recorded) EXPECT_NE(candidate, "mc=13 nc=7") << site;
}

TEST_F(TunerTest, SmallAndNestedProductsAreNotTuned) {
  const Stats before = stats();
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 1.0f), c(64 * 64);
  const Operands ops;
  std::vector<float> big(kM * kN);
  for (int i = 0; i < 10; ++i) {
    gemm::sgemm(64, 64, 64, {a.data(), 64, 1}, {b.data(), 64, 1}, c.data(), 64, false, true);
    // parallel=false: a product inside a caller's parallel loop.
    gemm::sgemm(kM, kN, kK, {ops.a.data(), kK, 1}, {ops.b.data(), kN, 1}, big.data(), kN, false, false);
  }
  EXPECT_EQ(c[0], 64.0f);
  EXPECT_EQ(stats().tune_sites, before.tune_sites);
}

TEST_F(TunerTest, TheBf16GemmsBlockingsGiveTheSameBitsToo) {
  if (gemm::activeBf16Isa() == gemm::Bf16Isa::none) GTEST_SKIP() << "this CPU has no bf16 units";
  const Operands ops;
  // bf16 operands: the f32 values' upper halves.
  std::vector<uint16_t> a(ops.a.size()), b(ops.b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(ops.a[i]) >> 16);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(ops.b[i]) >> 16);
  auto product = [&] {
    std::vector<float> c(kM * kN, -7.0f);
    gemm::gemmBf16(kM, kN, kK, {a.data(), kK, 1}, {b.data(), kN, 1}, c.data(), kN, false, /*parallel=*/true);
    return c;
  };
  const Stats start = stats();
  const std::vector<float> first = product();
  for (int64_t i = 0; i < kM; i += 97)
    for (int64_t j = 0; j < kN; j += 89) {
      double ref = 0;
      for (int64_t k = 0; k < kK; ++k)
        ref += double(std::bit_cast<float>(uint32_t{a[i * kK + k]} << 16)) *
               double(std::bit_cast<float>(uint32_t{b[k * kN + j]} << 16));
      ASSERT_NEAR(first[i * kN + j], ref, 1e-4) << i << "," << j;
    }
  runUntilSettled(product, first);
  const Stats end = stats();
  EXPECT_EQ(end.tune_sites - start.tune_sites, 1u);
  EXPECT_EQ(end.tune_sites_settled - start.tune_sites_settled, 1u);
  const uint64_t trials = end.tune_trials - start.tune_trials;
  EXPECT_TRUE(trials == 9u || trials == 11u) << "9 blockings, then maybe a confirming pair: " << end.str();
  const auto recorded = records();
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded.begin()->first.rfind("gemm_bf16 ", 0), 0u) << recorded.begin()->first;
}

TEST(TuningRecords, UnreadableLinesAndOtherFormatsAreSkipped) {
  std::map<std::string, std::string> r;
  EXPECT_EQ(Tuner::parseRecords("kiln-tuning 2\nsite a\tmc=56 nc=1024\nno tab here\n\tempty site\nx\ty\tz\n", &r), 3u);
  EXPECT_EQ(r, (std::map<std::string, std::string>{{"site a", "mc=56 nc=1024"}}));
  // Another format, the older one included (its sites never tried the
  // unpacked product): none of it is used.
  for (const char* other : {"kiln-tuning 1\nsite\tmc=1 nc=1\n", "kiln-tuning 3\nsite\tmc=1 nc=1\n"}) {
    r.clear();
    EXPECT_EQ(Tuner::parseRecords(other, &r), 1u) << other;
    EXPECT_TRUE(r.empty()) << other;
  }
  r.clear();
  EXPECT_EQ(Tuner::parseRecords("", &r), 0u);
  const std::map<std::string, std::string> some{{"s1", "mc=28 nc=512"}, {"s2", "mc=56 nc=2048"}};
  r.clear();
  EXPECT_EQ(Tuner::parseRecords(Tuner::formatRecords(some), &r), 0u);
  EXPECT_EQ(r, some);
}

}  // namespace
}  // namespace kiln::exec
