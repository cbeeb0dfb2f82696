// FuzzInput: reads typed fields from a fuzzer's bytes, zeros once they run out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

struct FuzzInput {
  const uint8_t* data;
  size_t size;

  uint8_t u8() {
    if (!size) return 0;
    --size;
    return *data++;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8 && size; ++i, ++data, --size) v = v << 8 | *data;
    return v;
  }
  /// Up to `max` bytes, the length chosen by the input.
  std::string str(size_t max) {
    const size_t n = std::min<size_t>(u64() % (max + 1), size);
    std::string s(reinterpret_cast<const char*>(data), n);
    data += n;
    size -= n;
    return s;
  }
};
