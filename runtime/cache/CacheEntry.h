// CacheEntry: the file format of one disk kernel cache entry, and of the
// bundles `kiln-cache export` writes. Plain C++ (no LLVM), shared by the
// runtime and the kiln-cache tool.
//
// An entry file is a 48-byte header, text metadata, then the object file:
//   "KILNKRN1" | u32 format | u32 metadata bytes | u64 object bytes |
//   u64 FNV-1a(metadata) | u64 FNV-1a(object) | u64 FNV-1a(the 40 bytes before)
// Its name is "<trace hash, 16 hex>-<fingerprint digest, 8 hex>.kiln". A
// reader checks the sizes against the file size, all three checksums, then
// that the full TraceKey and the fingerprint inside equal what it wants.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/LaunchProgram.h"

namespace kiln::exec::cache {

inline constexpr const char* kEntrySuffix = ".kiln";
/// Entries are written as "<kTempPrefix>..." and renamed; writes take
/// milliseconds, so a temporary file older than kDeadWriterSeconds belongs
/// to a writer that died (killed mid-write) and is removed. Younger ones
/// count towards the size cap like entries.
inline constexpr const char* kTempPrefix = ".tmp-";
inline constexpr int64_t kDeadWriterSeconds = 120;

/// Largest entry file a reader reads (and a writer writes): normal entries
/// are a few KB to a few MB, so anything near this is damage or an attack
/// (a file that never ends); the runtime lowers it to KILN_CACHE_MAX_MB.
inline constexpr uint64_t kMaxEntryBytes = uint64_t{256} << 20;
/// Largest bundle `kiln-cache import` reads.
inline constexpr uint64_t kMaxBundleBytes = uint64_t{4} << 30;
/// The entry size cap for a cache limited to `cacheMaxMb` MiB.
uint64_t maxEntryBytes(int64_t cacheMaxMb);

/// Everything about an entry except the object file.
struct EntryMeta {
  uint64_t keyHash = 0;
  std::vector<uint64_t> keyWords;  ///< the full TraceKey
  std::string fingerprint;         ///< KernelLoader::fingerprint() lines
  std::string entry;               ///< host: entry symbol in the object (GPU: empty)
  /// The object's format; GPU binaries list their launches.
  BinaryFormat format = BinaryFormat::SharedObject;
  std::vector<KernelDispatch> dispatches;
  /// GPU dynamic-shape kernels: what their launches compute from the sizes.
  std::vector<LaunchExpr> launchProgram;
  /// Where the code runs: "cpu" for host shared objects (also those of the
  /// test device), "level_zero" for SPIR-V, "cuda" for PTX and cubins.
  std::string device = "cpu";
  std::string ops;     ///< "matmul,add,tanh" (for listings)
  std::string inputs;  ///< "f32[37,19] f32[19,23]"
  uint64_t scratchBytes = 0;
  int kernelCount = 1;
  /// Buffer donation pairs (output, input): see Executable::donations.
  std::vector<std::pair<uint32_t, uint32_t>> donations;
  /// Dynamic-shape kernels: see Executable::dynamicSizes / dynamicScratch.
  int dynamicSizes = 0;
  std::vector<int64_t> dynamicScratch;
  /// Quick: a first-tier kernel that its process (or a later one) replaces
  /// with a Full one once its trace stays hot. Older entries are Full.
  CodegenEffort codegen = CodegenEffort::Full;
  double compileMs = 0;
  int64_t createdUnix = 0;
  uint64_t objectBytes = 0;     ///< filled by decode()
  uint64_t objectChecksum = 0;  ///< filled by decode()
};

struct Entry {
  EntryMeta meta;
  std::string object;
};

/// The `device` an entry of `format` names (EntryMeta::device).
const char* deviceOfFormat(BinaryFormat format);

/// FNV-1a, 64 bit. Detects every single-byte change.
uint64_t fnv1a(std::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);

/// The 8 hex digits of a fingerprint in entry file names.
std::string fingerprintDigest(const std::string& fingerprint);
/// "<keyHash>-<digest>.kiln".
std::string entryFileName(uint64_t keyHash, const std::string& fingerprint);
/// True for names entryFileName() makes; sets `*keyHash`.
bool parseEntryFileName(std::string_view name, uint64_t* keyHash);

/// The bytes of an entry file.
std::string encode(const Entry& entry);
/// Parses and verifies an entry file's bytes; false with `*error` when it is
/// truncated, corrupted or not an entry. With `headerOnly`, checks the
/// metadata only (for listings); `bytes` may then end after it.
bool decode(std::string_view bytes, Entry* out, std::string* error, bool headerOnly = false);

/// The value of `name` in "name=value" lines; empty when absent.
std::string fingerprintField(const std::string& fingerprint, std::string_view name);

/// Why an entry of key `have` (fingerprint `haveFp`) does not serve key
/// `want` (fingerprint `wantFp`): "" when it does; otherwise the first
/// difference in words a user knows ("node 3 (add): shape [4,8] vs [4,16]",
/// "llvm: 21.1.0 vs 22.1.0", "cpu feature +avx512f missing here").
std::string describeDifference(const std::vector<uint64_t>& want, const std::string& wantFp,
                               const std::vector<uint64_t>& have, const std::string& haveFp);
/// Whether two keys have the same op sequence.
bool sameStructure(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
/// A hash of the key's op sequence (0 when the words do not decode): equal
/// for keys sameStructure() calls the same.
uint64_t structureDigest(const std::vector<uint64_t>& keyWords);

/// Reads a whole regular file of at most `maxBytes` bytes; false with
/// `*error` for anything else: a symbolic link (unless `followLinks`), a
/// FIFO, device, socket or directory, or a larger file. Never blocks and
/// never reads such a file: it is opened with O_NONBLOCK (and O_NOFOLLOW)
/// and its type and size are checked on the open descriptor first. `*st`,
/// when given, receives that descriptor's fstat (owner, size, times).
bool readFile(const std::string& path, uint64_t maxBytes, std::string* out, std::string* error,
              bool followLinks = false, struct ::stat* st = nullptr);
/// Reads only an entry file's header and metadata (listings, the miss
/// index), with the same checks as readFile; decode(..., headerOnly) it.
bool readEntryHead(const std::string& path, uint64_t maxBytes, std::string* out, std::string* error,
                   struct ::stat* st = nullptr);
/// Writes `bytes` to `dir/name` atomically: a temporary file in `dir`,
/// fsync, rename, fsync of the directory. False with `*error` (errno text).
bool writeFileAtomic(const std::string& dir, const std::string& name, std::string_view bytes, std::string* error);

/// A bundle: entries (file name, bytes) with per-entry and overall checksums.
std::string encodeBundle(const std::vector<std::pair<std::string, std::string>>& files);
bool decodeBundle(std::string_view bytes, std::vector<std::pair<std::string, std::string>>* files,
                  std::string* error);

/// Signed bundles: the bundle's bytes, then "KILNSIG1" and the HMAC-SHA256
/// of everything before it under a key the service holds (KILN_CACHE_KEY).
/// Checksums only catch damage; the signature shows who made the bundle.
std::string signBundle(std::string bundle, std::string_view key);
enum class BundleSignature { Unsigned, Valid, Invalid };
/// Whether `bytes` carries a signature and, if so, whether `key` made it;
/// `*bundle` receives the bytes without the signature.
BundleSignature checkBundleSignature(std::string_view bytes, std::string_view key, std::string_view* bundle);

}  // namespace kiln::exec::cache
