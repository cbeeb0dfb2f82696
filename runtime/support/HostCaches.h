// HostCaches: the sizes of this machine's caches, for decisions that depend on
// what stays in cache: between kernels (the last level; streaming stores,
// jit/targets/cpu/StreamingStores.h) and within one (a core's L2; how much
// of a convolution one thread works on at a time). Machines of one kind
// differ here: a 2-core Zen 3 sees a 512 KiB L2 and a 32 MiB L3, a 2-core
// slice of a large Xeon 2 MiB and 480 MiB.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::exec {

/// What lastLevelCacheBytes() assumes where the kernel does not say (the
/// 2-core Zen 3's L3).
inline constexpr int64_t kDefaultLastLevelCacheBytes = int64_t{32} << 20;

/// Bytes of the highest-level data or unified cache CPU 0 reports
/// (/sys/devices/system/cpu/cpu0/cache), read once; the default where it
/// cannot be read.
int64_t lastLevelCacheBytes();

/// What levelTwoCacheBytes() assumes where the kernel does not say.
inline constexpr int64_t kDefaultLevelTwoCacheBytes = int64_t{1} << 20;

/// Bytes of CPU 0's level-2 data or unified cache, read once; the default
/// where it cannot be read.
int64_t levelTwoCacheBytes();

/// Makes lastLevelCacheBytes() return `bytes` (0: the machine's again), so
/// that tests of what the compiler does with it do the same on every
/// machine. Tests only.
void setLastLevelCacheBytesForTesting(int64_t bytes);

/// A sysfs cache size ("491520K", "32M", "1G", "65536") in bytes; -1 if it
/// is not one.
int64_t parseCacheSize(std::string_view text);

}  // namespace kiln::exec
