#include "runtime/cache/Sha256.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace kiln::exec {

namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress(uint32_t state[8], const unsigned char* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t{block[4 * i]} << 24 | uint32_t{block[4 * i + 1]} << 16 | uint32_t{block[4 * i + 2]} << 8 |
           uint32_t{block[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
           h = state[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

}  // namespace

namespace {
/// SHA-256 over the concatenation of `parts`, without copying them.
Digest256 sha256Parts(std::initializer_list<std::string_view> parts) {
  uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char buffer[128] = {};
  size_t buffered = 0;
  uint64_t total = 0;
  for (std::string_view part : parts) {
    const auto* p = reinterpret_cast<const unsigned char*>(part.data());
    size_t n = part.size();
    total += n;
    if (buffered > 0) {
      const size_t take = std::min(n, 64 - buffered);
      std::memcpy(buffer + buffered, p, take);
      buffered += take;
      p += take;
      n -= take;
      if (buffered < 64) continue;
      compress(state, buffer);
      buffered = 0;
    }
    for (; n >= 64; n -= 64, p += 64) compress(state, p);
    std::memcpy(buffer, p, n);
    buffered = n;
  }
  // Padding: 0x80, zeros, the length in bits (big-endian) in the last 8 bytes.
  std::memset(buffer + buffered, 0, sizeof(buffer) - buffered);
  buffer[buffered] = 0x80;
  const size_t blocks = buffered + 9 > 64 ? 2 : 1;
  const uint64_t bits = total * 8;
  for (int i = 0; i < 8; ++i) buffer[blocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (size_t b = 0; b < blocks; ++b) compress(state, buffer + 64 * b);
  Digest256 out;
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k) out[4 * i + k] = static_cast<uint8_t>(state[i] >> (24 - 8 * k));
  return out;
}
}  // namespace

Digest256 sha256(std::string_view data) { return sha256Parts({data}); }

Digest256 hmacSha256(std::string_view key, std::string_view data) {
  unsigned char block[64] = {};
  if (key.size() > 64) {
    const Digest256 k = sha256(key);
    std::memcpy(block, k.data(), k.size());
  } else {
    std::memcpy(block, key.data(), key.size());
  }
  char inner[64], outer[64];
  for (int i = 0; i < 64; ++i) {
    inner[i] = static_cast<char>(block[i] ^ 0x36);
    outer[i] = static_cast<char>(block[i] ^ 0x5c);
  }
  const Digest256 innerDigest = sha256Parts({{inner, 64}, data});
  return sha256Parts({{outer, 64}, {reinterpret_cast<const char*>(innerDigest.data()), innerDigest.size()}});
}

bool equalDigests(const Digest256& a, const Digest256& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace kiln::exec
