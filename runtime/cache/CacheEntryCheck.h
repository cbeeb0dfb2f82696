// CacheEntryCheck: whether an entry's metadata can be true of its key.
// Checksums only show that the bytes are the ones some writer wrote; an entry
// re-signed after damage, planted, or written by a buggy writer could still
// claim dynamic sizes for a static kernel, donations or scratch beyond the
// trace, or another kernel's entry symbol, and each of those crashes or
// exhausts memory at launch. The runtime and `kiln-cache verify` drop entries
// that fail. Plain C++ (no LLVM).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cache/CacheEntry.h"
#include "runtime/cache/TraceKeyCodec.h"

namespace kiln::exec::cache {

/// The entry symbol the compiler gives the kernel of a key (the engine names
/// kernels by key hash, CpuCompiler prefixes "kiln_entry_"):
/// "kiln_entry_<hash, 16 hex>", "kiln_entry_dyn_<hash>" for a dynamic-shape
/// kernel's key.
std::string entrySymbolFor(const std::vector<uint64_t>& keyWords, uint64_t keyHash);

/// The most scratch memory a kernel of `key` can need. Scratch holds the
/// kernel's temporaries, which are values of the trace (at most 8 bytes an
/// element: f16/bf16 compute in f32) plus, per matmul, its two operands
/// broadcast to the batch shape; each lowering makes at most a few
/// temporaries per value, so the bound is 4 times those bytes (64-byte
/// aligned each) plus 1 MiB. Extents of dynamic-shape keys count as 1 (their
/// temporaries' sizes are in dynamic_scratch, per element). Saturates at
/// UINT64_MAX.
uint64_t scratchBound(const DecodedKey& key);

/// The buffers a kernel of `keyWords` takes before its scratch buffer: its
/// inputs (the key's parameters) and outputs (its live outputs). False when
/// the words do not decode.
bool kernelBufferCounts(const std::vector<uint64_t>& keyWords, uint32_t* inputs, uint32_t* outputs);

/// "" when `meta` is consistent with its key words and `keyHash` (the hash
/// the entry is filed under); else the first inconsistency, in words.
std::string checkMetadata(const EntryMeta& meta, uint64_t keyHash);

}  // namespace kiln::exec::cache
