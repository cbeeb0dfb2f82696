// libFuzzer target: the disk kernel cache's entry reader (CacheEntry.h), the
// code that parses files anyone with write access to a cache directory could
// have planted. Two kinds of input: raw bytes, and an entry built from the
// input, encoded, then damaged at input-chosen places (reaches the checks
// behind the checksums, which raw bytes almost never pass). Any decode must
// return cleanly; what one accepts must survive encode and decode unchanged
// (the metadata text has one reading).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/cache/CacheEntry.h"
#include "test/fuzz/FuzzInput.h"

namespace cache = kiln::exec::cache;

namespace {

void decodeAndCheck(std::string_view bytes) {
  cache::Entry e;
  std::string error;
  cache::Entry header;
  cache::decode(bytes, &header, &error, /*headerOnly=*/true);
  if (!cache::decode(bytes, &e, &error)) return;
  const std::string once = cache::encode(e);
  cache::Entry again;
  if (!cache::decode(once, &again, &error) || cache::encode(again) != once) std::abort();
  cache::describeDifference(e.meta.keyWords, e.meta.fingerprint, e.meta.keyWords, e.meta.fingerprint);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  FuzzInput in{data + 1, size - 1};
  if ((mode & 1) == 0) {
    decodeAndCheck(std::string_view(reinterpret_cast<const char*>(in.data), in.size));
    return 0;
  }
  cache::Entry e;
  e.meta.keyHash = in.u64();
  for (uint64_t n = in.u64() % 16; n > 0; --n) e.meta.keyWords.push_back(in.u64());
  e.meta.fingerprint = in.str(256);
  e.meta.entry = in.str(64);
  e.meta.ops = in.str(64);
  e.meta.inputs = in.str(64);
  e.meta.scratchBytes = in.u64();
  e.meta.kernelCount = static_cast<int>(in.u64());
  for (uint64_t n = in.u64() % 4; n > 0; --n)
    e.meta.donations.emplace_back(static_cast<uint32_t>(in.u64()), static_cast<uint32_t>(in.u64()));
  e.meta.dynamicSizes = static_cast<int>(in.u64());
  for (uint64_t n = in.u64() % 8; n > 0; --n) e.meta.dynamicScratch.push_back(static_cast<int64_t>(in.u64()));
  e.object = in.str(512);
  std::string bytes = cache::encode(e);
  // Damage: flip, truncate or extend where the input says.
  for (uint64_t n = in.u64() % 4; n > 0 && !bytes.empty(); --n) {
    const uint64_t where = in.u64();
    switch (where % 3) {
      case 0: bytes[(where / 3) % bytes.size()] ^= static_cast<char>(1 + in.u64() % 255); break;
      case 1: bytes.resize((where / 3) % bytes.size()); break;
      default: bytes += in.str(32); break;
    }
  }
  decodeAndCheck(bytes);
  return 0;
}
