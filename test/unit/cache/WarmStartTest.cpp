// Warm starts (runtime/exec/WarmStart.h): a process records what its start
// needed; the program's next process loads those kernels and faults that
// memory in ahead of its first step, and still computes the same results.
#include "runtime/exec/WarmStart.h"

#include "test/unit/cache/CacheTestSupport.h"

namespace kiln::cachetest {
namespace {

using exec::WarmStart;
using exec::WarmStartRecord;

fs::path recordPath(const TempDir& dir) { return dir.path / WarmStart::recordFileName(); }

/// A process as if freshly started: no profiles, kernels, cached memory or
/// warm-up yet.
void freshWarmProcess() {
  CacheMode::freshProcess();
  WarmStart::instance().resetForTesting();
  empty_cache();
  reset_stats();
}

TEST(WarmStart, RecordsFormatAndParseBack) {
  WarmStartRecord r{{{10 << 20, 1}, {1 << 20, 4}, {64, 16}}, {0x9789883386540241ull, 0x1ull}};
  const std::string text = WarmStart::format(r);
  EXPECT_EQ(text,
            "kiln-warm-start 1\nblock 10485760 1\nblock 1048576 4\nblock 64 16\n"
            "kernel 9789883386540241\nkernel 0000000000000001\n");
  EXPECT_EQ(WarmStart::parse(text), r);
  EXPECT_EQ(WarmStart::parse("kiln-warm-start 1\n"), WarmStartRecord{});
}

TEST(WarmStart, DamagedRecordsAreRejected) {
  const std::string head = "kiln-warm-start 1\n";
  for (const std::string bad : {
           std::string(""), std::string("kiln-warm-start 2\n"), head + "block 1000 1\n" /* not a bucket size */,
           head + "block 64 0\n", head + "block 64\n", head + "block 64 1 1\n", head + "block -64 1\n",
           head + "block 8589934592 1\n" /* beyond the warm-up's budget */, head + "block 64 4294967296\n",
           head + "kernel 97898833865402\n", head + "kernel 9789883386540241 1\n",
           head + "kernel 978988338654024G\n", head + "kernel 978988338654024A\n" /* upper case */,
           head + "blocks 64 1\n", head + "\n"})
    EXPECT_FALSE(WarmStart::parse(bad)) << bad;
  std::string many = head;
  for (int i = 0; i < 17; ++i) many += "kernel 0000000000000001\n";
  EXPECT_FALSE(WarmStart::parse(many)) << "more kernels than a record holds";
}

TEST(WarmStart, ARecordIsWrittenOnlyWhenItChanged) {
  TempDir dir;
  const WarmStartRecord a{{{1 << 20, 2}}, {7}}, b{{{1 << 20, 3}}, {7}};
  WarmStart::store(dir.str(), a);
  EXPECT_EQ(WarmStart::parse(slurp(recordPath(dir))), a);
  const auto written = fs::last_write_time(recordPath(dir));
  WarmStart::store(dir.str(), a);
  EXPECT_EQ(fs::last_write_time(recordPath(dir)), written) << "the same record: not written again";
  WarmStart::store(dir.str(), b);
  EXPECT_EQ(WarmStart::parse(slurp(recordPath(dir))), b);
}

TEST(WarmStart, TheNextProcessStartsWithItsKernelsAndMemory) {
  TempDir dir;
  Data d(256, 128, 512);
  const auto reference = d.reference();
  CacheMode m(JitMode::Sync, 1, dir.str());
  freshWarmProcess();
  // The first process: its start lasts until the step's key runs again.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(close(d.run(), reference));
  WarmStart::instance().join();
  ASSERT_TRUE(fs::exists(recordPath(dir)));
  const auto record = WarmStart::parse(slurp(recordPath(dir)));
  ASSERT_TRUE(record);
  ASSERT_EQ(record->kernels.size(), 1u);
  EXPECT_EQ(record->kernels[0], exec::Engine::lastKey().hash);
  std::size_t recorded = 0;
  for (const hal::BlockDemand& b : record->blocks) recorded += b.bucket * b.count;
  EXPECT_GE(recorded, std::size_t{256 * 512 * 4}) << "at least the step's [256, 512] activation";

  // The next process replays: the warm-up (waited for here; in a service it
  // overlaps the set-up) has loaded the kernel, so the first step finds it
  // in memory and takes its memory from the allocator's cache.
  m.set(JitMode::Replay, 1, dir.str());
  freshWarmProcess();
  WarmStart::instance().begin();
  WarmStart::instance().join();
  Stats warmed = stats();
  EXPECT_EQ(warmed.warm_start_kernels, 1u) << warmed.str();
  EXPECT_EQ(warmed.cache_disk_hits, 1u) << warmed.str();
  EXPECT_GT(warmed.warm_start_bytes, 0u) << warmed.str();
  EXPECT_LE(warmed.warm_start_bytes, recorded);
  ASSERT_TRUE(close(d.run(), reference));
  Stats first = stats();
  EXPECT_EQ(first.compiled_runs, 1u) << first.str();
  EXPECT_EQ(first.cache_disk_hits, 1u) << "no second load: " << first.str();
  EXPECT_EQ(first.cache_memory_hits, 1u) << first.str();
  EXPECT_GT(first.allocator_cache_hits, warmed.allocator_cache_hits);
}

TEST(WarmStart, OffOrDamagedRecordsChangeNothingButTheWarmUp) {
  TempDir dir;
  Data d;
  const auto reference = d.reference();
  CacheMode m(JitMode::Sync, 1, dir.str());
  Settings s = settings();
  s.warm_start = "off";
  set_settings(s);
  freshWarmProcess();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(close(d.run(), reference));
  WarmStart::instance().join();
  EXPECT_FALSE(fs::exists(recordPath(dir))) << "off: no record written";

  // A damaged record: ignored (with a warning), nothing loaded or faulted.
  spit(recordPath(dir), "kiln-warm-start 1\nblock 1000 1\n");
  s.warm_start = "on";
  set_settings(s);
  freshWarmProcess();
  WarmStart::instance().begin();
  WarmStart::instance().join();
  EXPECT_EQ(stats().warm_start_kernels, 0u);
  EXPECT_EQ(stats().warm_start_bytes, 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(close(d.run(), reference));
  WarmStart::instance().join();
  // This process's start replaced it.
  EXPECT_TRUE(WarmStart::parse(slurp(recordPath(dir)))) << slurp(recordPath(dir));
}

}  // namespace
}  // namespace kiln::cachetest
