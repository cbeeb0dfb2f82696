#include "runtime/support/HostCaches.h"

#include <atomic>
#include <fstream>
#include <string>

namespace kiln::exec {

int64_t parseCacheSize(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return -1;
  int64_t scale = 1;
  switch (text.back()) {
    case 'K': scale = int64_t{1} << 10; break;
    case 'M': scale = int64_t{1} << 20; break;
    case 'G': scale = int64_t{1} << 30; break;
    default: break;
  }
  if (scale != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 12) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value * scale;
}

namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// Bytes of CPU 0's data or unified cache of level `wanted` (0: the highest
/// level there is); -1 if sysfs does not say.
int64_t readCacheBytes(int wanted) {
  int bestLevel = 0;
  int64_t bestBytes = -1;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = readLine(dir + "level");
    if (level.empty()) break;
    if (readLine(dir + "type") == "Instruction") continue;
    const int64_t bytes = parseCacheSize(readLine(dir + "size"));
    const int lvl = static_cast<int>(parseCacheSize(level));
    if (bytes > 0 && (wanted == 0 ? lvl >= bestLevel : lvl == wanted)) {
      bestLevel = lvl;
      bestBytes = bytes;
    }
  }
  return bestBytes;
}

std::atomic<int64_t> gTestingBytes{0};

}  // namespace

int64_t lastLevelCacheBytes() {
  if (const int64_t bytes = gTestingBytes.load(std::memory_order_relaxed); bytes > 0) return bytes;
  static const int64_t bytes = [] {
    const int64_t read = readCacheBytes(0);
    return read > 0 ? read : kDefaultLastLevelCacheBytes;
  }();
  return bytes;
}

int64_t levelTwoCacheBytes() {
  static const int64_t bytes = [] {
    const int64_t read = readCacheBytes(2);
    return read > 0 ? read : kDefaultLevelTwoCacheBytes;
  }();
  return bytes;
}

void setLastLevelCacheBytesForTesting(int64_t bytes) { gTestingBytes.store(bytes, std::memory_order_relaxed); }

}  // namespace kiln::exec
