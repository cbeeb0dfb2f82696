// Tier 2, background tuning: the engine's BlockingTuner. Each hot tuned call
// site (a large parallel f32 or bf16 GEMM shape) tries a few blockings on its real calls
// (TuningSession) and keeps the fastest. Decisions are logged at
// KILN_LOG=info, counted in stats() (tune_*), and stored in the disk cache
// as one record file per CPU ("tuning-<digest>.txt", keyed by the CPU's
// model, feature words and Kiln's version), so a later process — replaying
// ones included — runs the winners from its first call. KILN_TUNE=off runs
// every default and reads no record; KILN_JIT=replay uses records but starts
// no trials (a service's latency stays the default's or the recorded one's).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/exec/TuningSession.h"
#include "runtime/interp/gemm/BlockingTuner.h"

namespace kiln::exec {

class Tuner final : public interp::gemm::BlockingTuner {
 public:
  static Tuner& instance();

  size_t choose(const std::string& site, const std::vector<std::string>& candidates, bool* measure) override;
  void report(const std::string& site, size_t candidate, double seconds) override;

  /// Forgets every site and the records read (tests: a new process).
  void forget();
  /// The policy of sites first seen from now on (tests).
  void setPolicy(TuningPolicy policy);
  /// The record file's name in the cache directory for this CPU.
  static std::string recordFileName();

  /// Record files: a "kiln-tuning 2" line, then "site<TAB>candidate" lines.
  /// parseRecords skips lines it cannot read and returns how many it skipped.
  static std::string formatRecords(const std::map<std::string, std::string>& records);
  static size_t parseRecords(const std::string& text, std::map<std::string, std::string>* records);

 private:
  struct Site {
    TuningSession session;
    std::vector<std::string> candidates;
    /// A trial saw a compile take or give back a core: no sample. A
    /// decision made without all its samples is not stored.
    bool droppedTrials = false;
  };
  static void uncount(const Site& site);
  void loadRecordsLocked();
  void storeRecordLocked(const std::string& site, const std::string& candidate);

  std::mutex mutex_;
  TuningPolicy policy_;
  std::unordered_map<std::string, Site> sites_;
  bool recordsRead_ = false;
  std::string recordsDir_;  ///< the cache directory the records came from ("": none)
  std::map<std::string, std::string> records_;
};

}  // namespace kiln::exec
