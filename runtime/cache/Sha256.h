// Sha256: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for signed cache
// bundles (`kiln-cache export --sign`, `import` with KILN_CACHE_KEY). Small
// and dependency-free so that neither libkiln nor kiln-cache needs a crypto
// library; checked against the RFC 4231 test vectors.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::exec {

using Digest256 = std::array<uint8_t, 32>;

Digest256 sha256(std::string_view data);
Digest256 hmacSha256(std::string_view key, std::string_view data);
/// Compares in time independent of where they differ.
bool equalDigests(const Digest256& a, const Digest256& b);

}  // namespace kiln::exec
