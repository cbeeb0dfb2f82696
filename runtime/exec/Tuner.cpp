#include "runtime/exec/Tuner.h"

#include <sstream>

#include "kiln/runtime.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/support/Log.h"
#include "runtime/support/StatsCounters.h"

namespace kiln::exec {

namespace {
/// 2: the unpacked product joined the candidates (BlockingTuner.h); a
/// record of 1 chose among blockings alone and would keep a site from ever
/// trying it, so those files are read as another format and tuned anew.
constexpr const char* kRecordHeader = "kiln-tuning 2";
/// A record file is a line per tuned site: far below this.
constexpr uint64_t kMaxRecordBytes = uint64_t{4} << 20;

/// compilePartitionChanges() when this thread's trial was handed out (a
/// tuned call chooses and reports on its own thread).
thread_local uint64_t tTrialPartitionChanges = 0;

/// The engine's tuner serves every GEMM from the moment libkiln is loaded.
[[maybe_unused]] const bool gTunerInstalled = [] {
  interp::gemm::setBlockingTuner(&Tuner::instance());
  return true;
}();
}  // namespace

void Tuner::uncount(const Site& site) {
  // The site counts describe the table: a site that leaves it leaves them.
  counters().tuneSites--;
  if (site.session.phase() == TuningSession::Phase::Decided) counters().tuneSitesSettled--;
}

Tuner& Tuner::instance() {
  static Tuner* t = new Tuner();  // never destroyed: GEMMs may run at exit
  return *t;
}

std::string Tuner::recordFileName() {
  // What decides a blocking: the CPU (model and feature words) and the
  // GEMM's own code (Kiln's version), not the compiler's LLVM or pipeline.
  static const std::string name = [] {
    const std::string& fp = hostFingerprint();
    std::string key;
    for (const char* field : {"kiln", "cpu", "cpuid", "features"})
      key += std::string(field) + "=" + cache::fingerprintField(fp, field) + "\n";
    return "tuning-" + cache::fingerprintDigest(key) + ".txt";
  }();
  return name;
}

std::string Tuner::formatRecords(const std::map<std::string, std::string>& records) {
  std::string text = std::string(kRecordHeader) + "\n";
  for (const auto& [site, candidate] : records) text += site + "\t" + candidate + "\n";
  return text;
}

size_t Tuner::parseRecords(const std::string& text, std::map<std::string, std::string>* records) {
  std::istringstream in(text);
  std::string line;
  size_t skipped = 0;
  if (!std::getline(in, line) || line != kRecordHeader) return text.empty() ? 0 : 1;  // another format: none used
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size() || line.find('\t', tab + 1) != std::string::npos) {
      ++skipped;
      continue;
    }
    (*records)[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return skipped;
}

void Tuner::loadRecordsLocked() {
  const std::string dir = KernelCache::instance().usableDirectory();
  if (recordsRead_ && dir == recordsDir_) return;
  recordsRead_ = true;
  recordsDir_ = dir;
  records_.clear();
  if (dir.empty()) return;
  std::string text, error;
  const std::string path = dir + "/" + recordFileName();
  if (!cache::readFile(path, kMaxRecordBytes, &text, &error)) return;  // none yet (or not a plain file: not trusted)
  if (const size_t skipped = parseRecords(text, &records_))
    log().warn("tuning records {}: {} line(s) could not be read and were ignored", path, skipped);
  log().info("tuning: {} record(s) for this CPU in {}", records_.size(), path);
}

void Tuner::storeRecordLocked(const std::string& site, const std::string& candidate) {
  records_[site] = candidate;
  if (recordsDir_.empty()) return;
  // Another process may have stored records since this one read them: keep
  // theirs, with this process's on top.
  std::map<std::string, std::string> merged;
  std::string text, error;
  if (cache::readFile(recordsDir_ + "/" + recordFileName(), kMaxRecordBytes, &text, &error))
    parseRecords(text, &merged);
  for (const auto& [s, c] : records_) merged[s] = c;
  if (!cache::writeFileAtomic(recordsDir_, recordFileName(), formatRecords(merged), &error))
    log().debug("tuning: could not store the record of {} ({})", site, error);
}

size_t Tuner::choose(const std::string& site, const std::vector<std::string>& candidates, bool* measure) {
  *measure = false;
  const Settings& s = settings();
  if (s.tune == "off" || candidates.empty()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sites_.find(site);
  if (it != sites_.end() && it->second.candidates != candidates) {  // another Kiln's blockings under one name
    uncount(it->second);
    sites_.erase(it);
    it = sites_.end();
  }
  if (it == sites_.end()) {
    loadRecordsLocked();
    Site fresh{TuningSession(candidates.size(), policy_), candidates};
    bool fromRecord = false;
    if (auto r = records_.find(site); r != records_.end()) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i] != r->second) continue;
        fresh.session = TuningSession::decided(candidates.size(), i);
        fromRecord = true;
        log().info("tuning: {} runs the recorded {}", site, candidates[i]);
        counters().tuneRecordsUsed++;
        break;
      }
    }
    if (!fromRecord && s.jit == JitMode::Replay) fresh.session = TuningSession::decided(candidates.size(), 0);
    counters().tuneSites++;
    if (fresh.session.phase() == TuningSession::Phase::Decided) counters().tuneSitesSettled++;
    it = sites_.emplace(site, std::move(fresh)).first;
  }
  // A compile holds a core back: trials now would time the blockings on
  // fewer threads than the site is keyed by.
  if (compilePartitionActive() && it->second.session.phase() != TuningSession::Phase::Decided)
    return it->second.session.winner();
  const TuningSession::Phase before = it->second.session.phase();
  const size_t chosen = it->second.session.next(measure);
  if (*measure) tTrialPartitionChanges = compilePartitionChanges();
  if (before == TuningSession::Phase::Warming && it->second.session.phase() == TuningSession::Phase::Trying)
    log().info("tuning: {} is hot; trying {} ways to run it", site, candidates.size());
  if (*measure) counters().tuneTrials++;
  return chosen;
}

void Tuner::report(const std::string& site, size_t candidate, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sites_.find(site);
  if (it == sites_.end()) return;  // forgotten meanwhile
  TuningSession& session = it->second.session;
  if (session.phase() != TuningSession::Phase::Trying) return;
  // A background compile's spells take and give back a core: a trial that
  // spans one counts (the session hands out no more) but times nothing.
  if (compilePartitionChanges() != tTrialPartitionChanges) {
    seconds = -1;
    it->second.droppedTrials = true;
  }
  session.report(candidate, seconds);
  if (session.phase() != TuningSession::Phase::Decided) return;
  counters().tuneSitesSettled++;
  const std::vector<std::string>& names = it->second.candidates;
  if (session.winner() == 0)
    log().info("tuning: {} keeps the default {} (no other way was {:.0f} % faster, or stayed so in its "
               "confirming runs)",
               site, names[0], policy_.minGain * 100);
  else
    log().info("tuning: {} runs {}: {:.1f} % faster than the default {}", site, names[session.winner()],
               session.gain() * 100, names[0]);
  if (it->second.droppedTrials)
    log().info("tuning: {}'s choice is not stored: some of its trials saw a compile take or give back a core", site);
  else
    storeRecordLocked(site, names[session.winner()]);
}

void Tuner::forget() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, site] : sites_) uncount(site);
  sites_.clear();
  records_.clear();
  recordsRead_ = false;
  recordsDir_.clear();
}

void Tuner::setPolicy(TuningPolicy policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  policy_ = policy;
}

}  // namespace kiln::exec
