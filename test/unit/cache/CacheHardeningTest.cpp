// The disk kernel cache against hostile files and lying metadata: entries
// that are FIFOs, links to /dev/zero or oversized are refused unread (by the
// runtime and by kiln-cache), misses are explained from an index rather than
// by reading every entry, and entries re-signed with consistent checksums but
// wrong metadata are dropped and recompiled. Needs libkiln_jit;
// KILN_CACHE_TOOL names the kiln-cache binary.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <thread>

#include "runtime/cache/CacheEntryCheck.h"
#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/cache/CacheIndex.h"
#include "runtime/support/Log.h"
#include "runtime/cache/Sha256.h"
#include "test/unit/cache/CacheTestSupport.h"

namespace kiln {
namespace {

using namespace cachetest;
using Clock = std::chrono::steady_clock;

/// Runs `body` on a thread; a body still running after `seconds` (a read
/// blocked on a FIFO, an endless read of /dev/zero) fails the test and
/// aborts, rather than hanging CTest.
void within(int seconds, const std::function<void()>& body) {
  std::packaged_task<void()> task(body);
  auto done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: still running after %d s (blocked on a FIFO or reading without end?)\n", seconds);
    std::fflush(stderr);
    std::abort();
  }
  t.join();
  done.get();
}

/// Places a FIFO, a symbolic link to /dev/zero or an oversized regular file
/// at `path`.
enum class Hostile { Fifo, DevZeroLink, Oversized };
const char* nameOf(Hostile h) {
  return h == Hostile::Fifo ? "FIFO" : h == Hostile::DevZeroLink ? "link to /dev/zero" : "oversized file";
}
void plant(const fs::path& path, Hostile h, uint64_t oversizedBytes) {
  fs::remove(path);
  switch (h) {
    case Hostile::Fifo: ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0); break;
    case Hostile::DevZeroLink: fs::create_symlink("/dev/zero", path); break;
    case Hostile::Oversized: {
      std::ofstream out(path, std::ios::binary);
      out.seekp(static_cast<std::streamoff>(oversizedBytes));  // sparse: no disk used
      out.put('x');
      break;
    }
  }
}

/// KILN_LOG=info for one scope (miss explanations are written at info).
class InfoLog {
 public:
  InfoLog() : saved_(exec::log().level()) { exec::log().set_level(spdlog::level::info); }
  ~InfoLog() { exec::log().set_level(saved_); }

 private:
  spdlog::level::level_enum saved_;
};

/// Cache size cap for one scope (entries may be at most this large).
class CacheCapMb {
 public:
  explicit CacheCapMb(int64_t mb) : saved_(settings().cache_max_mb) {
    Settings s = settings();
    s.cache_max_mb = mb;
    set_settings(s);
  }
  ~CacheCapMb() {
    Settings s = settings();
    s.cache_max_mb = saved_;
    set_settings(s);
  }

 private:
  int64_t saved_;
};

// --- Reading files -----------------------------------------------------------

TEST(CacheFiles, OnlyBoundedRegularFilesAreRead) {
  TempDir dir;
  const fs::path regular = dir.path / "regular", fifo = dir.path / "fifo", link = dir.path / "link",
                 big = dir.path / "big", sub = dir.path / "sub";
  spit(regular, std::string(100, 'r'));
  plant(fifo, Hostile::Fifo, 0);
  plant(link, Hostile::DevZeroLink, 0);
  plant(big, Hostile::Oversized, 8192);
  fs::create_directory(sub);
  within(20, [&] {
    std::string bytes, error;
    EXPECT_TRUE(cache::readFile(regular.string(), 4096, &bytes, &error)) << error;
    EXPECT_EQ(bytes, std::string(100, 'r'));
    struct Case {
      fs::path path;
      const char* why;
    };
    for (const Case& c : {Case{fifo, "FIFO"}, Case{link, "symbolic link"}, Case{big, "too large"},
                          Case{sub, "directory"}}) {
      SCOPED_TRACE(c.path.filename().string());
      bytes = "stale";
      EXPECT_FALSE(cache::readFile(c.path.string(), 4096, &bytes, &error));
      EXPECT_NE(error.find(c.why), std::string::npos) << error;
      EXPECT_FALSE(cache::readEntryHead(c.path.string(), 4096, &bytes, &error));
      EXPECT_NE(error.find(c.why), std::string::npos) << error;
    }
    // Following links (a bundle path) still refuses the device behind it.
    EXPECT_FALSE(cache::readFile(link.string(), 4096, &bytes, &error, /*followLinks=*/true));
    EXPECT_NE(error.find("character device"), std::string::npos) << error;
  });
  EXPECT_EQ(cache::maxEntryBytes(1), uint64_t{1} << 20);
  EXPECT_EQ(cache::maxEntryBytes(int64_t{1} << 50), cache::kMaxEntryBytes);
}

TEST(CacheFiles, HostileEntriesAreDroppedUnreadAndTheTraceRecompiled) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  const fs::path file = fillCache(dir.str(), d);
  CacheCapMb cap(1);
  for (Hostile h : {Hostile::Fifo, Hostile::DevZeroLink, Hostile::Oversized}) {
    SCOPED_TRACE(nameOf(h));
    plant(file, h, uint64_t{2} << 20);
    within(60, [&] {
      Stats s = runAfterDamage(dir.str(), d, reference);
      EXPECT_EQ(s.cache_rejected, 1u) << s.str();
    });
    // Removed and rewritten as a valid entry.
    ASSERT_TRUE(fs::is_regular_file(fs::symlink_status(file)));
    cache::Entry e;
    std::string error;
    EXPECT_TRUE(cache::decode(slurp(file), &e, &error)) << error;
  }
  EXPECT_TRUE(fs::exists("/dev/zero"));
}

TEST(CacheFiles, MissExplanationsSkipHostileEntries) {
  TempDir dir;
  Data d, other(5, 19, 7);
  auto otherRef = other.reference();
  const fs::path file = fillCache(dir.str(), d);
  CacheCapMb cap(1);
  // Hostile files under valid entry names (keys nobody asks for).
  plant(dir.path / cache::entryFileName(0x1111, "x"), Hostile::Fifo, 0);
  plant(dir.path / cache::entryFileName(0x2222, "x"), Hostile::DevZeroLink, 0);
  plant(dir.path / cache::entryFileName(0x3333, "x"), Hostile::Oversized, uint64_t{2} << 20);
  within(60, [&] {
    InfoLog info;
    CacheMode m(JitMode::Sync, 1, dir.str());
    CacheMode::freshProcess();
    reset_stats();
    EXPECT_TRUE(close(other.run(), otherRef));  // a miss, explained
    Stats s = stats();
    EXPECT_GE(s.cache_misses, 1u) << s.str();
    EXPECT_EQ(s.compiles, 1u) << s.str();
  });
  exec::CacheIndex index(dir.str(), cache::maxEntryBytes(1));
  within(20, [&] {
    cache::Entry e;
    std::string error;
    ASSERT_TRUE(cache::decode(slurp(file), &e, &error)) << error;
    std::vector<uint64_t> words = e.meta.keyWords;
    words.back() ^= 1;  // another live-output set: same structure
    const std::string why = index.explainMiss(words, 0x4444, e.meta.fingerprint);
    EXPECT_NE(why.find("nearest entry"), std::string::npos) << why;
  });
}

// --- The miss index ----------------------------------------------------------

TEST(CacheIndex, ManyMissesOnALargeCacheReadEachEntryOnce) {
  TempDir dir;
  Data d;
  const fs::path file = fillCache(dir.str(), d);
  cache::Entry real;
  std::string error;
  ASSERT_TRUE(cache::decode(slurp(file), &real, &error)) << error;
  // The first node is the Param x of shape [37, 19]: words 2 and 3.
  ASSERT_GE(real.meta.keyWords.size(), 4u);
  ASSERT_EQ(real.meta.keyWords[2], 37u);
  // 552 entries of the same structure at other batch sizes, as a loop over
  // batch sizes leaves behind.
  const int kEntries = 552, kMisses = 89;
  for (int i = 0; i < kEntries; ++i) {
    cache::Entry e = real;
    e.meta.keyWords[2] = 1000 + static_cast<uint64_t>(i);
    e.meta.keyHash = 0x50000 + static_cast<uint64_t>(i);
    spit(dir.path / cache::entryFileName(e.meta.keyHash, e.meta.fingerprint), cache::encode(e));
  }
  exec::CacheIndex index(dir.str(), cache::kMaxEntryBytes);
  const auto t0 = Clock::now();
  for (int j = 0; j < kMisses; ++j) {
    std::vector<uint64_t> words = real.meta.keyWords;
    words[2] = 5000 + static_cast<uint64_t>(j);
    const std::string why = index.explainMiss(words, 0x90000 + static_cast<uint64_t>(j), real.meta.fingerprint);
    EXPECT_NE(why.find("nearest entry"), std::string::npos) << why;
    EXPECT_NE(why.find("shape [" + std::to_string(5000 + j) + ",19] here"), std::string::npos) << why;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("%d misses on a %d-entry cache explained in %.1f ms\n", kMisses, kEntries + 1, ms);
  EXPECT_EQ(index.size(), static_cast<size_t>(kEntries + 1));
  EXPECT_EQ(index.headersRead(), static_cast<uint64_t>(kEntries + 1)) << "each entry is read once";
  // A new entry (another process) is read alone; a removed one is forgotten.
  cache::Entry e = real;
  e.meta.keyWords[2] = 7;
  e.meta.keyHash = 0x7777;
  spit(dir.path / cache::entryFileName(e.meta.keyHash, e.meta.fingerprint), cache::encode(e));
  fs::remove(dir.path / cache::entryFileName(0x50000, real.meta.fingerprint));
  std::vector<uint64_t> words = real.meta.keyWords;
  words[2] = 8;
  EXPECT_NE(index.explainMiss(words, 1, real.meta.fingerprint).find(cache::entryFileName(0x7777, e.meta.fingerprint)),
            std::string::npos);
  EXPECT_EQ(index.headersRead(), static_cast<uint64_t>(kEntries + 2));
  EXPECT_EQ(index.size(), static_cast<size_t>(kEntries + 1));
}

// --- Metadata ----------------------------------------------------------------

/// A valid entry with one field changed, re-signed (consistent checksums).
struct Damage {
  std::string what;
  std::function<void(cache::Entry&)> apply;
  std::string why;  ///< expected in checkMetadata's answer
};

TEST(CacheMetadata, ResignedEntriesWithWrongMetadataAreDroppedAndRecompiled) {
  TempDir dir;
  Data d, other(5, 19, 7);
  auto reference = d.reference();
  const fs::path file = fillCache(dir.str(), d);
  const std::string good = slurp(file);
  cache::Entry base, foreign;
  std::string error;
  ASSERT_TRUE(cache::decode(good, &base, &error)) << error;
  EXPECT_EQ(cache::checkMetadata(base.meta, base.meta.keyHash), "");
  EXPECT_EQ(base.meta.entry, cache::entrySymbolFor(base.meta.keyWords, base.meta.keyHash));
  {
    TempDir otherDir;
    ASSERT_TRUE(cache::decode(slurp(fillCache(otherDir.str(), other)), &foreign, &error)) << error;
  }
  const std::vector<Damage> damages = {
      {"dynamic sizes on a static kernel", [](cache::Entry& e) { e.meta.dynamicSizes = 2; }, "dynamic_sizes=2"},
      {"scratch 2^64-1", [](cache::Entry& e) { e.meta.scratchBytes = ~uint64_t{0}; }, "scratch of"},
      {"scratch 1 TB", [](cache::Entry& e) { e.meta.scratchBytes = uint64_t{1} << 40; }, "scratch of"},
      {"donation beyond the outputs", [](cache::Entry& e) { e.meta.donations = {{99, 0}}; }, "donation 99:0"},
      {"donation beyond the inputs", [](cache::Entry& e) { e.meta.donations = {{0, 99}}; }, "donation 0:99"},
      {"one input donated to two outputs", [](cache::Entry& e) { e.meta.donations = {{0, 0}, {1, 0}}; },
       "shares a buffer twice"},
      {"no kernels", [](cache::Entry& e) { e.meta.kernelCount = 0; }, "kernel_count=0"},
      {"another kernel's symbol", [&](cache::Entry& e) { e.meta.entry = foreign.meta.entry; }, "entry symbol"},
      {"another trace's object and symbol",
       [&](cache::Entry& e) {
         e.object = foreign.object;
         e.meta.entry = foreign.meta.entry;
         e.meta.scratchBytes = foreign.meta.scratchBytes;
         e.meta.kernelCount = foreign.meta.kernelCount;
       },
       "entry symbol"},
      {"another trace's object", [&](cache::Entry& e) { e.object = foreign.object; }, ""},
  };
  for (const Damage& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    cache::Entry bad = base;
    dmg.apply(bad);
    if (!dmg.why.empty()) {
      const std::string why = cache::checkMetadata(bad.meta, base.meta.keyHash);
      EXPECT_NE(why.find(dmg.why), std::string::npos) << why;
    }
    spit(file, cache::encode(bad));
    Stats s = runAfterDamage(dir.str(), d, reference);
    EXPECT_EQ(s.cache_rejected, 1u) << s.str();
    cache::Entry back;
    ASSERT_TRUE(cache::decode(slurp(file), &back, &error)) << error;
    EXPECT_EQ(cache::checkMetadata(back.meta, back.meta.keyHash), "");
  }
}

TEST(CacheMetadata, GpuEntriesKeepTheirLaunchesAndRefuseLaunchesBeyondTheirKernel) {
  TempDir dir;
  Data d;
  cache::Entry host;
  std::string error;
  ASSERT_TRUE(cache::decode(slurp(fillCache(dir.str(), d)), &host, &error)) << error;
  uint32_t inputs = 0, outputs = 0;
  ASSERT_TRUE(cache::kernelBufferCounts(host.meta.keyWords, &inputs, &outputs));
  ASSERT_GT(inputs, 0u);
  ASSERT_GT(outputs, 0u);
  // The same key as a Level Zero kernel: SPIR-V bytes and two launches.
  using Arg = exec::DispatchArg;
  cache::Entry gpu = host;
  gpu.meta.format = exec::BinaryFormat::Spirv;
  gpu.meta.device = "level_zero";
  gpu.meta.entry.clear();
  gpu.meta.scratchBytes = 4096;
  gpu.meta.kernelCount = 2;
  gpu.meta.dispatches = {
      {"kernel_a", {4, 1, 1}, {256, 1, 1}, {{Arg::Kind::Input, 0}, {Arg::Kind::Scratch, 1024}, {Arg::Kind::Index, -7}}},
      {"kernel_b", {2, 3, 1}, {32, 8, 1},
       {{Arg::Kind::Scratch, 1024}, {Arg::Kind::Input, inputs - 1}, {Arg::Kind::Output, outputs - 1}}}};
  gpu.object = std::string("\x03\x02\x23\x07", 4) + std::string(60, '\0');
  EXPECT_EQ(cache::checkMetadata(gpu.meta, gpu.meta.keyHash), "");
  cache::Entry back;
  ASSERT_TRUE(cache::decode(cache::encode(gpu), &back, &error)) << error;
  EXPECT_EQ(back.meta.format, exec::BinaryFormat::Spirv);
  EXPECT_EQ(back.meta.device, "level_zero");
  ASSERT_EQ(back.meta.dispatches.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.meta.dispatches[i].symbol, gpu.meta.dispatches[i].symbol);
    EXPECT_EQ(back.meta.dispatches[i].grid, gpu.meta.dispatches[i].grid);
    EXPECT_EQ(back.meta.dispatches[i].block, gpu.meta.dispatches[i].block);
    EXPECT_EQ(back.meta.dispatches[i].args, gpu.meta.dispatches[i].args);
  }
  EXPECT_EQ(back.object, gpu.object);
  // Host entries keep the format older readers know (no format line).
  EXPECT_EQ(cache::encode(host).find("format="), std::string::npos);

  const std::vector<Damage> damages = {
      {"an input beyond the kernel's", [](cache::Entry& e) { e.meta.dispatches[0].args[0].index = 99; },
       "reads input 99"},
      {"an output beyond the kernel's",
       [&](cache::Entry& e) { e.meta.dispatches[1].args[2].index = outputs; }, "writes output"},
      {"a pointer past the scratch", [](cache::Entry& e) { e.meta.dispatches[0].args[1].index = 4096; },
       "bytes of scratch"},
      {"a negative scratch offset", [](cache::Entry& e) { e.meta.dispatches[0].args[1].index = -64; },
       "bytes of scratch"},
      {"dynamic sizes", [](cache::Entry& e) { e.meta.dispatches[0].args[2].kind = Arg::Kind::Sizes; },
       "dynamic sizes"},
      {"a block of 2048 threads", [](cache::Entry& e) { e.meta.dispatches[0].block[0] = 2048; }, "out of range"},
      {"a block of 64x32", [](cache::Entry& e) { e.meta.dispatches[1].block = {64, 32, 1}; }, "threads in a block"},
      {"an empty grid", [](cache::Entry& e) { e.meta.dispatches[1].grid[1] = 0; }, "out of range"},
      {"a name that is no kernel's", [](cache::Entry& e) { e.meta.dispatches[0].symbol = "a;rm -rf"; },
       "not a kernel name"},
      {"a donated buffer", [](cache::Entry& e) { e.meta.donations = {{0, 0}}; }, "buffer donations in a GPU binary"},
      {"a launch program in a static kernel",
       [](cache::Entry& e) { e.meta.launchProgram = {{exec::LaunchExpr::Op::Constant, 1}}; }, "takes no sizes"},
      {"launches and kernel count disagree", [](cache::Entry& e) { e.meta.kernelCount = 3; }, "kernel_count=3"},
      {"a host entry symbol", [&](cache::Entry& e) { e.meta.entry = host.meta.entry; }, "host entry symbol"},
      {"SPIR-V said to run on the CPU", [](cache::Entry& e) { e.meta.device = "cpu"; }, "does not run SPIR-V"},
      {"a host object with launches",
       [&](cache::Entry& e) {
         e.meta.format = exec::BinaryFormat::SharedObject;
         e.meta.device = "cpu";
         e.meta.entry = host.meta.entry;
       },
       "host kernel with GPU launches"},
  };
  for (const Damage& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    cache::Entry bad = gpu;
    dmg.apply(bad);
    const std::string why = cache::checkMetadata(bad.meta, gpu.meta.keyHash);
    EXPECT_NE(why.find(dmg.why), std::string::npos) << why;
  }
  // A GPU entry without launches does not even decode.
  cache::Entry none = gpu;
  none.meta.dispatches.clear();
  EXPECT_FALSE(cache::decode(cache::encode(none), &back, &error));
  EXPECT_NE(error.find("incomplete metadata"), std::string::npos) << error;
}

TEST(CacheMetadata, DynamicShapeEntriesAreCheckedAgainstTheirSizes) {
  TempDir dir;
  Tensor w = rand({19, 23}, 2, DType::f32, -1, 1), b = rand({23}, 3, DType::f32, -1, 1);
  std::vector<Tensor> batches;
  for (int64_t rows : {3, 4, 5, 6}) batches.push_back(rand({rows, 19}, 10 + rows, DType::f32, -1, 1));
  kiln::sync();
  // One structure at four batch sizes (no size-dependent constants).
  auto step = [&](const Tensor& x) {
    Tensor y = tanh(matmul(x, w) + b);
    std::vector<float> r = sum(y * y, {1}).to_vector<float>();
    kiln::step();
    return r;
  };
  std::vector<std::vector<float>> references;
  {
    Settings saved = settings(), s = saved;
    s.jit = JitMode::Off;
    set_settings(s);
    for (const Tensor& x : batches) references.push_back(step(x));
    set_settings(saved);
  }
  auto runAll = [&](const char* what) {
    SCOPED_TRACE(what);
    CacheMode m(JitMode::Sync, 1, dir.str());
    CacheMode::freshProcess();
    Settings s = settings();
    s.max_shapes = 2;  // the third batch size gets one dynamic-shape kernel
    set_settings(s);
    reset_stats();
    for (size_t i = 0; i < batches.size(); ++i) EXPECT_TRUE(close(step(batches[i]), references[i])) << i;
    return stats();
  };
  runAll("first process");
  fs::path dynamicFile;
  cache::Entry e;
  std::string error;
  for (const fs::path& p : entryFiles(dir.str())) {
    cache::Entry x;
    ASSERT_TRUE(cache::decode(slurp(p), &x, &error)) << error;
    EXPECT_EQ(cache::checkMetadata(x.meta, x.meta.keyHash), "") << p;
    if (x.meta.dynamicSizes > 0) {
      dynamicFile = p;
      e = x;
    }
  }
  ASSERT_FALSE(dynamicFile.empty()) << "no dynamic-shape kernel was cached";
  EXPECT_EQ(e.meta.entry, cache::entrySymbolFor(e.meta.keyWords, e.meta.keyHash));
  EXPECT_NE(e.meta.entry.find("kiln_entry_dyn_"), std::string::npos);
  const std::vector<Damage> damages = {
      {"one size more", [](cache::Entry& x) { x.meta.dynamicSizes += 1; }, "dynamic sizes"},
      {"a scratch term over a size it does not have",
       [](cache::Entry& x) { x.meta.dynamicScratch.insert(x.meta.dynamicScratch.end(), {64, 1, 7}); },
       "dynamic_scratch names size 7"},
      {"a terabyte per size",
       [](cache::Entry& x) { x.meta.dynamicScratch.insert(x.meta.dynamicScratch.end(), {int64_t{1} << 40, 1, 0}); },
       "scratch of"},
  };
  const std::string good = slurp(dynamicFile);
  for (const Damage& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    cache::Entry bad = e;
    dmg.apply(bad);
    const std::string why = cache::checkMetadata(bad.meta, e.meta.keyHash);
    EXPECT_NE(why.find(dmg.why), std::string::npos) << why;
    spit(dynamicFile, cache::encode(bad));
    Stats s = runAll("damaged");
    EXPECT_EQ(s.cache_rejected, 1u) << s.str();
    EXPECT_EQ(s.compiles, 1u) << s.str();  // the dynamic kernel again; the static ones load
    cache::Entry back;
    ASSERT_TRUE(cache::decode(slurp(dynamicFile), &back, &error)) << error;
    EXPECT_EQ(cache::checkMetadata(back.meta, back.meta.keyHash), "");
  }

  // The same key as a dynamic-shape SPIR-V kernel: a grid and arguments
  // its launch program computes from the size (runtime/exec/LaunchProgram.h).
  using Arg = exec::DispatchArg;
  using Op = exec::LaunchExpr::Op;
  uint32_t inputs = 0, outputs = 0;
  ASSERT_TRUE(cache::kernelBufferCounts(e.meta.keyWords, &inputs, &outputs));
  cache::Entry gpu = e;
  gpu.meta.format = exec::BinaryFormat::Spirv;
  gpu.meta.device = "level_zero";
  gpu.meta.entry.clear();
  gpu.meta.scratchBytes = 128;
  gpu.meta.dynamicScratch = {4, 1, 0};  // and 4 bytes per unit of size 0 after them
  gpu.meta.kernelCount = 1;
  gpu.meta.launchProgram = {{Op::Size, 0}, {Op::Constant, 255}, {Op::Add, 0, 1}, {Op::Constant, 256},
                            {Op::DivS, 2, 3}, {Op::Constant, 4}, {Op::Mul, 0, 5}};
  exec::KernelDispatch d{"kernel_dyn", {1, 1, 1}, {256, 1, 1},
                         {{Arg::Kind::Input, 0}, {Arg::Kind::Value, 0}, {Arg::Kind::Scratch, 128},
                          {Arg::Kind::ScratchAt, 6}, {Arg::Kind::Output, outputs - 1}}};
  d.gridSteps = {4, -1, -1};
  gpu.meta.dispatches = {d};
  gpu.object = std::string("\x03\x02\x23\x07", 4) + std::string(60, '\0');
  EXPECT_EQ(cache::checkMetadata(gpu.meta, gpu.meta.keyHash), "");
  cache::Entry back;
  ASSERT_TRUE(cache::decode(cache::encode(gpu), &back, &error)) << error;
  EXPECT_EQ(back.meta.launchProgram, gpu.meta.launchProgram);
  ASSERT_EQ(back.meta.dispatches.size(), 1u);
  EXPECT_EQ(back.meta.dispatches[0].gridSteps, d.gridSteps);
  EXPECT_EQ(back.meta.dispatches[0].args, d.args);
  const std::vector<Damage> gpuDamages = {
      {"a step reading a later one", [](cache::Entry& x) { x.meta.launchProgram[2].b = 4; }, "reads step 4"},
      {"a size the kernel does not take", [](cache::Entry& x) { x.meta.launchProgram[0].a = 1; }, "reads size 1"},
      {"a grid beyond the program", [](cache::Entry& x) { x.meta.dispatches[0].gridSteps[1] = 7; }, "out of range"},
      {"a value beyond the program", [](cache::Entry& x) { x.meta.dispatches[0].args[1].index = 7; },
       "reads launch step 7"},
      {"a scratch offset past the static part",
       [](cache::Entry& x) { x.meta.dispatches[0].args[2].index = 192; }, "bytes of scratch"},
      {"a scratch pointer one past a scratch with no dynamic part",
       [](cache::Entry& x) {
         x.meta.dynamicScratch.clear();
         x.meta.dispatches[0].args[2].index = 128;
       },
       "bytes of scratch"},
      {"a launch program in a host entry",
       [&](cache::Entry& x) {
         x.meta.format = exec::BinaryFormat::SharedObject;
         x.meta.device = "cpu";
         x.meta.entry = e.meta.entry;
         x.meta.dispatches.clear();
       },
       "host kernel with a launch program"},
  };
  for (const Damage& dmg : gpuDamages) {
    SCOPED_TRACE(dmg.what);
    cache::Entry bad = gpu;
    dmg.apply(bad);
    const std::string why = cache::checkMetadata(bad.meta, gpu.meta.keyHash);
    EXPECT_NE(why.find(dmg.why), std::string::npos) << why;
  }
}

TEST(CacheMetadata, ScratchBoundCoversRealKernelsAndIsFarBelowATerabyte) {
  TempDir dir;
  Data d;
  cache::Entry e;
  std::string error;
  ASSERT_TRUE(cache::decode(slurp(fillCache(dir.str(), d)), &e, &error)) << error;
  cache::DecodedKey key;
  ASSERT_TRUE(cache::decodeKey(e.meta.keyWords, &key));
  const uint64_t bound = cache::scratchBound(key);
  EXPECT_GE(bound, e.meta.scratchBytes);
  EXPECT_LT(bound, uint64_t{16} << 20) << "a step on 37x19 and 19x23 values";
}

// --- Kernel size -------------------------------------------------------------

/// Relative closeness for sums over millions of elements (the compiled and
/// interpreted kernels add in different orders).
::testing::AssertionResult near(double a, double b, double tolerance = 1e-4) {
  if (std::fabs(a - b) <= tolerance * (1 + std::fabs(b))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b;
}

TEST(KernelSize, SplatsStaySplatsInCompiledKernels) {
  TempDir dir;
  Tensor x = rand({2048, 2048}, 5);
  kiln::sync();
  // full() feeding arithmetic, and one held by the program (a kernel output).
  auto program = [&](std::vector<float>* held) {
    Tensor f = full({2048, 2048}, 3.0);
    Tensor s = (full({2048, 2048}, 2.5) * x + f).sum();
    const float r = s.item<float>();
    if (held) *held = f.to_vector<float>();
    kiln::step();
    return r;
  };
  float reference;
  {
    Settings saved = settings(), s = saved;
    s.jit = JitMode::Off;
    set_settings(s);
    reference = program(nullptr);
    set_settings(saved);
  }
  CacheMode m(JitMode::Sync, 1, dir.str());
  CacheMode::freshProcess();
  reset_stats();
  std::vector<float> held;
  EXPECT_TRUE(near(program(&held), reference));
  EXPECT_TRUE(near(program(&held), reference));
  ASSERT_EQ(held.size(), size_t{2048} * 2048);
  EXPECT_EQ(std::count(held.begin(), held.end(), 3.0f), static_cast<long>(held.size()));
  Stats s = stats();
  EXPECT_GE(s.compiles, 1u) << s.str();
  EXPECT_GE(s.compiled_runs, 1u) << s.str();
  const auto files = entryFiles(dir.str());
  ASSERT_FALSE(files.empty());
  for (const fs::path& f : files) {
    std::printf("entry %s: %ju bytes\n", f.filename().c_str(), static_cast<uintmax_t>(fs::file_size(f)));
    EXPECT_LT(fs::file_size(f), 200u << 10) << f << ": a constant stored in the kernel?";
  }
}

TEST(KernelSize, AHugeSplatSlicedAndSummedCompilesSmallAndAgrees) {
  TempDir dir;
  const int64_t huge = int64_t{1} << 31;
  // `holdBig`: the program keeps the 2^62-element constant, so a kernel
  // would have to return it densely; it then stays interpreted (logged).
  auto program = [&](bool holdBig) {
    Tensor big = full({huge, huge}, 0.5);
    Tensor part = slice(slice(big, 0, 0, 64), 1, huge - 32, huge);
    if (!holdBig) big = Tensor();
    const float r = (part * 3.0 + 1.0).sum().item<float>();
    kiln::step();
    return r;
  };
  float reference;
  {
    Settings saved = settings(), s = saved;
    s.jit = JitMode::Off;
    set_settings(s);
    reference = program(true);
    set_settings(saved);
  }
  EXPECT_FLOAT_EQ(reference, 64 * 32 * 2.5f);
  within(120, [&] {
    CacheMode m(JitMode::Sync, 1, dir.str());
    CacheMode::freshProcess();
    reset_stats();
    EXPECT_FLOAT_EQ(program(false), reference);
    EXPECT_FLOAT_EQ(program(false), reference);
    Stats s = stats();
    EXPECT_EQ(s.compile_failures, 0u) << s.str();
    EXPECT_EQ(s.compiled_runs, 2u) << s.str();
    reset_stats();
    EXPECT_FLOAT_EQ(program(true), reference);
    EXPECT_FLOAT_EQ(program(true), reference);
    s = stats();
    EXPECT_EQ(s.compile_failures, 1u) << s.str();
    EXPECT_EQ(s.interpreted_runs, 2u) << s.str();
  });
  for (const fs::path& f : entryFiles(dir.str())) EXPECT_LT(fs::file_size(f), 200u << 10) << f;
}

// --- kiln-cache --------------------------------------------------------------

/// Runs kiln-cache with `args`; its exit status, or -1 (after killing it)
/// when it has not finished within `seconds`. `*out` receives its stdout.
int runTool(const std::vector<std::string>& args, std::string* out, int seconds = 20) {
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return -2;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipeFds[0]);
  std::vector<std::string> argv{KILN_CACHE_TOOL};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string envCap = "KILN_CACHE_MAX_MB=1";
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_", 5) != 0) envp.push_back(*e);
  envp.push_back(envCap.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, KILN_CACHE_TOOL, &actions, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipeFds[1]);
  if (rc != 0) {
    ::close(pipeFds[0]);
    return -2;
  }
  out->clear();
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(pipeFds[0]);
      return -1;
    }
    pollfd p{pipeFds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(pipeFds[0], buf, sizeof(buf));
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(pipeFds[0]);
  return waitChild(pid);
}

TEST(KilnCacheTool, ListsStatsAndVerifiesHostileDirectoriesWithoutHanging) {
  TempDir dir;
  Data d;
  const fs::path file = fillCache(dir.str(), d);
  cache::Entry e;
  std::string error;
  ASSERT_TRUE(cache::decode(slurp(file), &e, &error)) << error;
  const std::string fifo = cache::entryFileName(0x1111, "x"), link = cache::entryFileName(0x2222, "x"),
                    big = cache::entryFileName(0x3333, "x");
  plant(dir.path / fifo, Hostile::Fifo, 0);
  plant(dir.path / link, Hostile::DevZeroLink, 0);
  plant(dir.path / big, Hostile::Oversized, uint64_t{2} << 20);
  // A re-signed entry whose scratch no kernel of its trace needs.
  cache::Entry lying = e;
  lying.meta.keyHash = 0x4444;
  lying.meta.entry = cache::entrySymbolFor(lying.meta.keyWords, lying.meta.keyHash);
  lying.meta.scratchBytes = uint64_t{1} << 40;
  const std::string lyingName = cache::entryFileName(lying.meta.keyHash, lying.meta.fingerprint);
  spit(dir.path / lyingName, cache::encode(lying));

  std::string out;
  EXPECT_EQ(runTool({"--dir", dir.str(), "list"}, &out), 0) << out;
  for (const std::string& name : {fifo, link, big}) EXPECT_NE(out.find(name + "  BAD"), std::string::npos) << out;
  EXPECT_EQ(runTool({"--dir", dir.str(), "stats"}, &out), 0) << out;
  EXPECT_NE(out.find("unreadable 3"), std::string::npos) << out;
  EXPECT_EQ(runTool({"--dir", dir.str(), "verify"}, &out), 1) << out;
  EXPECT_NE(out.find("BAD " + fifo + ": not a regular file (a FIFO)"), std::string::npos) << out;
  EXPECT_NE(out.find("BAD " + link + ": a symbolic link"), std::string::npos) << out;
  EXPECT_NE(out.find("BAD " + big + ": too large"), std::string::npos) << out;
  EXPECT_NE(out.find("BAD " + lyingName + ": its metadata does not fit its trace: scratch of"), std::string::npos)
      << out;
  EXPECT_NE(out.find("1 good, 4 bad"), std::string::npos) << out;

  // A bundle whose checksums agree but whose entry lies is not imported.
  const std::string bundle = (dir.path / "lying.bundle").string();
  spit(bundle, cache::encodeBundle({{lyingName, cache::encode(lying)}}));
  TempDir target;
  EXPECT_EQ(runTool({"--dir", target.str(), "import", bundle}, &out), 1) << out;
  EXPECT_TRUE(entryFiles(target.str()).empty());
  spit(bundle, cache::encodeBundle({{file.filename().string(), slurp(file)}}));
  EXPECT_EQ(runTool({"--dir", target.str(), "import", bundle}, &out), 0) << out;
  EXPECT_EQ(entryFiles(target.str()).size(), 1u);
}

// --- Signed bundles ----------------------------------------------------------

std::string hex(const exec::Digest256& d) {
  std::string s;
  char b[3];
  for (uint8_t x : d) {
    std::snprintf(b, sizeof(b), "%02x", x);
    s += b;
  }
  return s;
}

TEST(BundleSignature, Sha256AndHmacMatchPublishedVectors) {
  EXPECT_EQ(hex(exec::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(exec::sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(exec::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(exec::sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // RFC 4231, test cases 1, 2 and 6 (a key longer than the block).
  EXPECT_EQ(hex(exec::hmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(exec::hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(exec::hmacSha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(BundleSignature, OnlyBundlesSignedWithTheKeyAreImported) {
  TempDir dir;
  Data d;
  const fs::path file = fillCache(dir.str(), d);
  const std::string key = (dir.path / "service.key").string(), otherKey = (dir.path / "other.key").string(),
                    shortKey = (dir.path / "short.key").string();
  spit(key, "0123456789abcdef-the-service-secret");
  spit(otherKey, "another-secret-of-enough-length");
  spit(shortKey, "short");
  const std::string bundle = (dir.path / "signed.bundle").string(), plain = (dir.path / "plain.bundle").string();
  std::string out;
  ASSERT_EQ(runTool({"--dir", dir.str(), "export", bundle, "--all", "--key", key}, &out), 0) << out;
  EXPECT_NE(out.find("(signed)"), std::string::npos) << out;
  ASSERT_EQ(runTool({"--dir", dir.str(), "export", plain, "--all"}, &out), 0) << out;

  std::string_view body;
  const std::string signedBytes = slurp(bundle);
  EXPECT_EQ(cache::checkBundleSignature(signedBytes, slurp(key), &body), cache::BundleSignature::Valid);
  EXPECT_EQ(cache::checkBundleSignature(signedBytes, slurp(otherKey), &body), cache::BundleSignature::Invalid);
  EXPECT_EQ(cache::checkBundleSignature(slurp(plain), slurp(key), &body), cache::BundleSignature::Unsigned);

  auto importInto = [&](const std::string& file, std::vector<std::string> extra) {
    TempDir target;
    std::vector<std::string> args{"--dir", target.str(), "import", file};
    args.insert(args.end(), extra.begin(), extra.end());
    const int rc = runTool(args, &out);
    return std::make_pair(rc, entryFiles(target.str()).size());
  };
  EXPECT_EQ(importInto(bundle, {"--key", key}), std::make_pair(0, size_t{1})) << out;
  EXPECT_NE(out.find("signature verified"), std::string::npos) << out;
  EXPECT_EQ(importInto(plain, {"--key", key}), std::make_pair(1, size_t{0})) << out;
  EXPECT_EQ(importInto(bundle, {"--key", otherKey}), std::make_pair(1, size_t{0})) << out;
  EXPECT_EQ(importInto(bundle, {"--key", shortKey}), std::make_pair(2, size_t{0})) << out;
  // A signed bundle changed after signing, its checksums recomputed (here:
  // its entry dropped, which no checksum or entry check can notice).
  spit(plain, cache::encodeBundle({}) + signedBytes.substr(signedBytes.size() - 40));
  EXPECT_EQ(importInto(plain, {"--key", key}), std::make_pair(1, size_t{0})) << out;
  // Without a key, unsigned bundles are still accepted on their checksums.
  EXPECT_EQ(importInto(bundle, {}), std::make_pair(0, size_t{1})) << out;
}

}  // namespace
}  // namespace kiln
