#include "runtime/cache/CacheEntry.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cinttypes>
#include <cstring>
#include <iterator>
#include <random>
#include <sstream>

#include "kiln/dtype.h"
#include "runtime/core/OpKind.h"
#include "runtime/cache/Sha256.h"
#include "runtime/cache/TraceKeyCodec.h"

namespace kiln::exec::cache {

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'R', 'N', '1'};
constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'D', 'L', '1'};
constexpr char kSignatureMagic[8] = {'K', 'I', 'L', 'N', 'S', 'I', 'G', '1'};
constexpr size_t kSignatureBytes = 8 + 32;
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 48;

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T>
T get(std::string_view s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

std::string hex16(uint64_t x) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016" PRIx64, x);
  return b;
}

std::string opNameOf(uint32_t op) {
  if (op >= static_cast<uint32_t>(core::kNumOpKinds)) return "op#" + std::to_string(op);
  return std::string(core::opName(static_cast<core::OpKind>(op)));
}
std::string dtypeNameOf(uint32_t t) { return std::string(dtype_name(static_cast<DType>(t))); }
std::string listOf(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(static_cast<int64_t>(v[i]));
  return s + "]";
}

/// Format names in entry metadata ("format=spirv"; absent: a shared object).
const char* formatToken(BinaryFormat f) {
  switch (f) {
    case BinaryFormat::SharedObject: return "shared_object";
    case BinaryFormat::Ptx: return "ptx";
    case BinaryFormat::Cubin: return "cubin";
    case BinaryFormat::Spirv: return "spirv";
  }
  return "?";
}

bool parseFormatToken(const std::string& token, BinaryFormat* f) {
  for (BinaryFormat candidate :
       {BinaryFormat::SharedObject, BinaryFormat::Ptx, BinaryFormat::Cubin, BinaryFormat::Spirv})
    if (token == formatToken(candidate)) {
      *f = candidate;
      return true;
    }
  return false;
}

/// One launch as a metadata line: "symbol gx gy gz bx by bz arg...", a
/// grid size computed by the launch program as "e" and its step, each
/// argument a letter and a number: i (input), o (output), s (scratch byte
/// offset), z (sizes), n (integer), v (launch step), t (scratch, at a
/// launch step's byte offset).
std::string encodeDispatch(const KernelDispatch& d) {
  std::ostringstream m;
  m << d.symbol;
  for (int i = 0; i < 3; ++i) {
    if (d.gridSteps[i] >= 0) m << " e" << d.gridSteps[i];
    else m << " " << d.grid[i];
  }
  for (int64_t v : d.block) m << " " << v;
  for (const DispatchArg& a : d.args) {
    const char* letter = "n";
    switch (a.kind) {
      case DispatchArg::Kind::Input: letter = "i"; break;
      case DispatchArg::Kind::Output: letter = "o"; break;
      case DispatchArg::Kind::Scratch: letter = "s"; break;
      case DispatchArg::Kind::Sizes: letter = "z"; break;
      case DispatchArg::Kind::Index: letter = "n"; break;
      case DispatchArg::Kind::Value: letter = "v"; break;
      case DispatchArg::Kind::ScratchAt: letter = "t"; break;
    }
    m << " " << letter << a.index;
  }
  return m.str();
}

bool decodeDispatch(const std::string& line, KernelDispatch* d) {
  std::stringstream ss(line);
  if (!(ss >> d->symbol)) return false;
  for (int i = 0; i < 3; ++i) {
    std::string size;
    if (!(ss >> size) || size.empty()) return false;
    const bool step = size[0] == 'e';
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(size.c_str() + step, &end, 10);
    if (errno != 0 || *end != '\0' || end == size.c_str() + step) return false;
    if (step) {
      if (v < 0 || v > INT32_MAX) return false;
      d->gridSteps[i] = static_cast<int32_t>(v);
    } else {
      d->grid[i] = v;
    }
  }
  for (int64_t& v : d->block)
    if (!(ss >> v)) return false;
  std::string arg;
  while (ss >> arg) {
    if (arg.size() < 2) return false;
    DispatchArg a;
    switch (arg[0]) {
      case 'i': a.kind = DispatchArg::Kind::Input; break;
      case 'o': a.kind = DispatchArg::Kind::Output; break;
      case 's': a.kind = DispatchArg::Kind::Scratch; break;
      case 'z': a.kind = DispatchArg::Kind::Sizes; break;
      case 'n': a.kind = DispatchArg::Kind::Index; break;
      case 'v': a.kind = DispatchArg::Kind::Value; break;
      case 't': a.kind = DispatchArg::Kind::ScratchAt; break;
      default: return false;
    }
    char* end = nullptr;
    errno = 0;
    a.index = std::strtoll(arg.c_str() + 1, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    d->args.push_back(a);
  }
  return true;
}

/// The operations of a launch program step, as the metadata spells them.
constexpr const char* kLaunchOps[] = {"const", "size", "add",  "sub",  "mul",      "divs", "rems",
                                      "floordivs", "ceildivs", "mins", "maxs", "divu", "remu", "ceildivu",
                                      "eq",    "ne",   "lt",   "le",   "gt",       "ge",   "select"};
static_assert(std::size(kLaunchOps) == static_cast<size_t>(LaunchExpr::Op::Select) + 1);

/// One launch program step as a metadata line: "op a b c".
std::string encodeLaunchStep(const LaunchExpr& e) {
  std::ostringstream m;
  m << kLaunchOps[static_cast<size_t>(e.op)] << " " << e.a << " " << e.b << " " << e.c;
  return m.str();
}

bool decodeLaunchStep(const std::string& line, LaunchExpr* e) {
  std::stringstream ss(line);
  std::string op;
  if (!(ss >> op >> e->a >> e->b >> e->c)) return false;
  std::string rest;
  if (ss >> rest) return false;
  for (size_t i = 0; i < std::size(kLaunchOps); ++i)
    if (op == kLaunchOps[i]) {
      e->op = static_cast<LaunchExpr::Op>(i);
      return true;
    }
  return false;
}

std::vector<std::string> splitFeatures(const std::string& f) {
  std::vector<std::string> out;
  std::stringstream ss(f);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string describeFingerprint(const std::string& want, const std::string& have) {
  for (const char* field : {"kiln", "llvm", "triple", "cpu", "features", "pipeline"}) {
    const std::string w = fingerprintField(want, field), h = fingerprintField(have, field);
    if (w == h) continue;
    if (std::string_view(field) != "features")
      return std::string(field) + ": cached for '" + h + "', this process has '" + w + "'";
    auto wf = splitFeatures(w), hf = splitFeatures(h);
    std::string diff;
    for (const std::string& f : hf)
      if (std::find(wf.begin(), wf.end(), f) == wf.end()) diff += " " + f;
    return "cpu features: the entry was compiled with" + (diff.empty() ? std::string(" a different set") : diff) +
           " (this CPU differs)";
  }
  return want == have ? std::string() : std::string("fingerprint text differs");
}
}  // namespace

const char* deviceOfFormat(BinaryFormat format) {
  switch (format) {
    case BinaryFormat::SharedObject: return "cpu";
    case BinaryFormat::Ptx:
    case BinaryFormat::Cubin: return "cuda";
    case BinaryFormat::Spirv: return "level_zero";
  }
  return "?";
}

uint64_t fnv1a(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string fingerprintDigest(const std::string& fingerprint) {
  char b[9];
  std::snprintf(b, sizeof(b), "%08" PRIx32, static_cast<uint32_t>(fnv1a(fingerprint) >> 32));
  return b;
}

std::string entryFileName(uint64_t keyHash, const std::string& fingerprint) {
  return hex16(keyHash) + "-" + fingerprintDigest(fingerprint) + kEntrySuffix;
}

bool parseEntryFileName(std::string_view name, uint64_t* keyHash) {
  const std::string_view suffix = kEntrySuffix;
  if (name.size() != 16 + 1 + 8 + suffix.size() || name[16] != '-' || name.substr(25) != suffix) return false;
  for (size_t i = 0; i < 25; ++i)
    if (i != 16 && !std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  *keyHash = std::strtoull(std::string(name.substr(0, 16)).c_str(), nullptr, 16);
  return true;
}

std::string encode(const Entry& e) {
  std::ostringstream m;
  m << "key_hash=" << hex16(e.meta.keyHash) << "\nkey_words=";
  for (size_t i = 0; i < e.meta.keyWords.size(); ++i) m << (i ? " " : "") << std::hex << e.meta.keyWords[i];
  m << std::dec << "\nentry=" << e.meta.entry;
  // Host entries keep the layout older readers know: no format line.
  if (e.meta.format != BinaryFormat::SharedObject) m << "\nformat=" << formatToken(e.meta.format);
  for (const KernelDispatch& d : e.meta.dispatches) m << "\ndispatch=" << encodeDispatch(d);
  for (const LaunchExpr& step : e.meta.launchProgram) m << "\nlaunch_step=" << encodeLaunchStep(step);
  m << "\ndevice=" << e.meta.device << "\nops=" << e.meta.ops
    << "\ninputs=" << e.meta.inputs << "\nscratch_bytes=" << e.meta.scratchBytes
    << "\nkernel_count=" << e.meta.kernelCount << "\ndonations=";
  for (size_t i = 0; i < e.meta.donations.size(); ++i)
    m << (i ? " " : "") << e.meta.donations[i].first << ":" << e.meta.donations[i].second;
  if (e.meta.dynamicSizes > 0) {
    m << "\ndynamic_sizes=" << e.meta.dynamicSizes << "\ndynamic_scratch=";
    for (size_t i = 0; i < e.meta.dynamicScratch.size(); ++i) m << (i ? " " : "") << e.meta.dynamicScratch[i];
  }
  // Full entries keep the layout older readers know: no codegen line.
  if (e.meta.codegen != CodegenEffort::Full) m << "\ncodegen=" << codegenEffortName(e.meta.codegen);
  m << "\ncompile_ms=" << e.meta.compileMs
    << "\ncreated=" << e.meta.createdUnix << "\n";
  // Fingerprint lines last, prefixed.
  std::stringstream fp(e.meta.fingerprint);
  std::string line;
  while (std::getline(fp, line))
    if (!line.empty()) m << "fp." << line << "\n";
  const std::string meta = m.str();
  std::string out;
  out.reserve(kHeaderBytes + meta.size() + e.object.size());
  out.append(kMagic, 8);
  put<uint32_t>(out, kFormat);
  put<uint32_t>(out, static_cast<uint32_t>(meta.size()));
  put<uint64_t>(out, e.object.size());
  put<uint64_t>(out, fnv1a(meta));
  put<uint64_t>(out, fnv1a(e.object));
  put<uint64_t>(out, fnv1a(out));
  out += meta;
  out += e.object;
  return out;
}

bool decode(std::string_view bytes, Entry* out, std::string* error, bool headerOnly) {
  auto bad = [&](const std::string& why) {
    *error = why;
    return false;
  };
  if (bytes.size() < kHeaderBytes) return bad("truncated header");
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) return bad("not a kiln kernel cache entry");
  if (get<uint64_t>(bytes, 40) != fnv1a(bytes.substr(0, 40))) return bad("header checksum mismatch");
  if (get<uint32_t>(bytes, 8) != kFormat) return bad("unknown entry format " + std::to_string(get<uint32_t>(bytes, 8)));
  const uint64_t metaSize = get<uint32_t>(bytes, 12), objectSize = get<uint64_t>(bytes, 16);
  if (bytes.size() < kHeaderBytes + metaSize) return bad("truncated metadata");
  if (!headerOnly && (objectSize > bytes.size() || bytes.size() != kHeaderBytes + metaSize + objectSize))
    return bad("size " + std::to_string(bytes.size()) + " bytes, expected " +
               std::to_string(kHeaderBytes + metaSize + objectSize) + " (truncated or extended)");
  const std::string_view meta = bytes.substr(kHeaderBytes, metaSize);
  if (fnv1a(meta) != get<uint64_t>(bytes, 24)) return bad("metadata checksum mismatch");
  EntryMeta m;
  m.objectBytes = objectSize;
  m.objectChecksum = get<uint64_t>(bytes, 32);
  std::stringstream ss{std::string(meta)};
  std::string line;
  bool haveKey = false, haveEntry = false;
  while (std::getline(ss, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) return bad("malformed metadata line");
    const std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name.rfind("fp.", 0) == 0) {
      m.fingerprint += name.substr(3) + "=" + value + "\n";
    } else if (name == "key_hash") {
      m.keyHash = std::strtoull(value.c_str(), nullptr, 16);
    } else if (name == "key_words") {
      std::stringstream ws(value);
      std::string w;
      while (ws >> w) m.keyWords.push_back(std::strtoull(w.c_str(), nullptr, 16));
      haveKey = true;
    } else if (name == "entry") {
      m.entry = value;
      haveEntry = !value.empty();
    } else if (name == "format") {
      if (!parseFormatToken(value, &m.format)) return bad("unknown object format '" + value + "'");
    } else if (name == "dispatch") {
      KernelDispatch d;
      if (!decodeDispatch(value, &d)) return bad("malformed dispatch");
      m.dispatches.push_back(std::move(d));
    } else if (name == "launch_step") {
      LaunchExpr step;
      if (!decodeLaunchStep(value, &step)) return bad("malformed launch step");
      m.launchProgram.push_back(step);
    } else if (name == "device") {
      m.device = value;
    } else if (name == "ops") {
      m.ops = value;
    } else if (name == "inputs") {
      m.inputs = value;
    } else if (name == "scratch_bytes") {
      m.scratchBytes = std::strtoull(value.c_str(), nullptr, 10);
    } else if (name == "kernel_count") {
      m.kernelCount = std::atoi(value.c_str());
    } else if (name == "donations") {
      std::stringstream ds(value);
      std::string pair;
      while (ds >> pair) {
        const size_t colon = pair.find(':');
        if (colon == std::string::npos) return bad("malformed donations");
        m.donations.emplace_back(static_cast<uint32_t>(std::strtoul(pair.substr(0, colon).c_str(), nullptr, 10)),
                                 static_cast<uint32_t>(std::strtoul(pair.substr(colon + 1).c_str(), nullptr, 10)));
      }
    } else if (name == "dynamic_sizes") {
      m.dynamicSizes = std::atoi(value.c_str());
      if (m.dynamicSizes < 0) return bad("malformed dynamic_sizes");
    } else if (name == "dynamic_scratch") {
      std::stringstream ds(value);
      std::string term;
      while (ds >> term) m.dynamicScratch.push_back(std::strtoll(term.c_str(), nullptr, 10));
      for (size_t i = 0; i + 1 < m.dynamicScratch.size();) {
        const int64_t count = m.dynamicScratch[i + 1];
        if (count < 0 || i + 2 + static_cast<size_t>(count) > m.dynamicScratch.size()) return bad("malformed dynamic_scratch");
        i += 2 + static_cast<size_t>(count);
      }
    } else if (name == "codegen") {
      if (value == "quick") m.codegen = CodegenEffort::Quick;
      else if (value != "full") return bad("unknown codegen '" + value + "'");
    } else if (name == "compile_ms") {
      m.compileMs = std::atof(value.c_str());
    } else if (name == "created") {
      m.createdUnix = std::strtoll(value.c_str(), nullptr, 10);
    }
  }
  // A host object has an entry symbol; a GPU binary has its launches.
  const bool haveCode = m.format == BinaryFormat::SharedObject ? haveEntry : !m.dispatches.empty();
  if (!haveKey || !haveCode || m.fingerprint.empty()) return bad("incomplete metadata");
  if (!headerOnly) {
    const std::string_view object = bytes.substr(kHeaderBytes + metaSize);
    if (fnv1a(object) != m.objectChecksum) return bad("object checksum mismatch");
    out->object.assign(object);
  }
  out->meta = std::move(m);
  return true;
}

std::string fingerprintField(const std::string& fingerprint, std::string_view name) {
  std::stringstream ss(fingerprint);
  std::string line;
  while (std::getline(ss, line))
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == '=')
      return line.substr(name.size() + 1);
  return {};
}

bool sameStructure(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  const uint64_t x = structureDigest(a);
  return x != 0 && x == structureDigest(b);
}

uint64_t structureDigest(const std::vector<uint64_t>& keyWords) {
  DecodedKey k;
  if (!decodeKey(keyWords, &k)) return 0;
  std::string ops;
  ops.push_back(k.dynamic ? 'd' : 's');
  for (const KeyNode& n : k.nodes) ops.append(reinterpret_cast<const char*>(&n.op), sizeof(n.op));
  return fnv1a(ops) | 1;  // never 0
}

std::string describeDifference(const std::vector<uint64_t>& want, const std::string& wantFp,
                               const std::vector<uint64_t>& have, const std::string& haveFp) {
  if (want == have) return describeFingerprint(wantFp, haveFp);
  DecodedKey w, h;
  if (!decodeKey(want, &w) || !decodeKey(have, &h)) return "a different trace";
  if (w.device != h.device) return "the device differs";
  if (w.nodes.size() != h.nodes.size())
    return "a different number of nodes (" + std::to_string(w.nodes.size()) + " here, " +
           std::to_string(h.nodes.size()) + " cached)";
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    const KeyNode &a = w.nodes[i], &b = h.nodes[i];
    const std::string at = "node " + std::to_string(i) + " (" + opNameOf(a.op) + ")";
    if (a.op != b.op) return at + ": the cached entry has " + opNameOf(b.op) + " there";
    if (a.dtype != b.dtype) return at + ": dtype " + dtypeNameOf(a.dtype) + " here, " + dtypeNameOf(b.dtype) + " cached";
    if (a.shape != b.shape) return at + ": shape " + listOf(a.shape) + " here, " + listOf(b.shape) + " cached";
    if (a.inputs != b.inputs) return at + ": different operands";
    if (a.attrs != b.attrs || a.keepdim != b.keepdim)
      return at + ": attributes " + listOf(a.attrs) + " here, " + listOf(b.attrs) + " cached";
    if (a.rest != b.rest)
      return at + (a.op == static_cast<uint32_t>(core::OpKind::Param) ? ": parameter layout or aliasing differs"
                                                                        : ": scalar attribute differs");
  }
  if (w.outputs != h.outputs) return "the set of live outputs differs";
  return "the key differs";
}

uint64_t maxEntryBytes(int64_t cacheMaxMb) {
  if (cacheMaxMb <= 0 || static_cast<uint64_t>(cacheMaxMb) >= (kMaxEntryBytes >> 20)) return kMaxEntryBytes;
  return static_cast<uint64_t>(cacheMaxMb) << 20;
}

namespace {
/// Opens `path` for reading if it is a regular file of at most `maxBytes`
/// bytes; -1 with `*error` otherwise. O_NONBLOCK: opening a FIFO returns at
/// once (and is then refused) instead of waiting for a writer.
int openRegular(const std::string& path, uint64_t maxBytes, bool followLinks, struct ::stat* st,
                std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followLinks ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    *error = errno == ELOOP ? std::string("a symbolic link (entries must be regular files)") : std::strerror(errno);
    return -1;
  }
  auto refuse = [&](std::string why) {
    *error = std::move(why);
    ::close(fd);
    return -1;
  };
  if (::fstat(fd, st) != 0) return refuse(std::strerror(errno));
  if (!S_ISREG(st->st_mode))
    return refuse(std::string("not a regular file (") +
                  (S_ISFIFO(st->st_mode)  ? "a FIFO"
                   : S_ISCHR(st->st_mode) ? "a character device"
                   : S_ISBLK(st->st_mode) ? "a block device"
                   : S_ISDIR(st->st_mode) ? "a directory"
                   : S_ISSOCK(st->st_mode) ? "a socket"
                                          : "a special file") +
                  ")");
  if (static_cast<uint64_t>(st->st_size) > maxBytes)
    return refuse("too large: " + std::to_string(st->st_size) + " bytes, more than the " +
                  std::to_string(maxBytes) + " bytes an entry may have");
  return fd;
}

/// Appends up to `n` bytes from `fd` to `out`; false with `*error`.
bool readUpTo(int fd, uint64_t n, std::string* out, std::string* error) {
  char buf[1 << 16];
  while (n > 0) {
    const ssize_t got = ::read(fd, buf, static_cast<size_t>(std::min<uint64_t>(n, sizeof(buf))));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      *error = std::strerror(errno);
      return false;
    }
    if (got == 0) break;
    out->append(buf, static_cast<size_t>(got));
    n -= static_cast<uint64_t>(got);
  }
  return true;
}
}  // namespace

bool readFile(const std::string& path, uint64_t maxBytes, std::string* out, std::string* error, bool followLinks,
              struct ::stat* st) {
  struct ::stat own;
  if (!st) st = &own;
  const int fd = openRegular(path, maxBytes, followLinks, st, error);
  if (fd < 0) return false;
  out->clear();
  out->reserve(static_cast<size_t>(st->st_size));
  // One byte past the cap tells a file that grew after fstat.
  const bool ok = readUpTo(fd, maxBytes + 1, out, error);
  ::close(fd);
  if (ok && out->size() > maxBytes) {
    *error = "grew beyond " + std::to_string(maxBytes) + " bytes while being read";
    return false;
  }
  return ok;
}

bool readEntryHead(const std::string& path, uint64_t maxBytes, std::string* out, std::string* error,
                   struct ::stat* st) {
  struct ::stat own;
  if (!st) st = &own;
  const int fd = openRegular(path, maxBytes, false, st, error);
  if (fd < 0) return false;
  out->clear();
  bool ok = readUpTo(fd, kHeaderBytes, out, error);
  if (ok && out->size() == kHeaderBytes) {
    const uint64_t metaSize = get<uint32_t>(*out, 12);
    ok = readUpTo(fd, std::min<uint64_t>(metaSize, maxBytes > kHeaderBytes ? maxBytes - kHeaderBytes : 0), out, error);
  }
  ::close(fd);
  return ok;
}

bool writeFileAtomic(const std::string& dir, const std::string& name, std::string_view bytes, std::string* error) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = dir + "/" + kTempPrefix + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) +
                          "-" + hex16(rng()).substr(0, 8);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  auto fail = [&](int err) {
    *error = std::strerror(err);
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail(errno);
  if (::close(fd) != 0) {
    *error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) {
    *error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

std::string encodeBundle(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out(kBundleMagic, 8);
  put<uint32_t>(out, kFormat);
  put<uint32_t>(out, static_cast<uint32_t>(files.size()));
  for (const auto& [name, bytes] : files) {
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    put<uint64_t>(out, bytes.size());
    put<uint64_t>(out, fnv1a(bytes));
    out += bytes;
  }
  put<uint64_t>(out, fnv1a(out));
  return out;
}

bool decodeBundle(std::string_view bytes, std::vector<std::pair<std::string, std::string>>* files,
                  std::string* error) {
  auto bad = [&](const std::string& why) {
    *error = why;
    return false;
  };
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kBundleMagic, 8) != 0) return bad("not a kiln-cache bundle");
  const size_t bodyEnd = bytes.size() - 8;
  if (get<uint64_t>(bytes, bodyEnd) != fnv1a(bytes.substr(0, bodyEnd))) return bad("bundle checksum mismatch");
  if (get<uint32_t>(bytes, 8) != kFormat) return bad("unknown bundle format");
  const uint32_t count = get<uint32_t>(bytes, 12);
  size_t at = 16;
  for (uint32_t i = 0; i < count; ++i) {
    if (at + 4 > bodyEnd) return bad("truncated bundle");
    const uint32_t nameLen = get<uint32_t>(bytes, at);
    at += 4;
    if (at + nameLen + 16 > bodyEnd) return bad("truncated bundle");
    std::string name(bytes.substr(at, nameLen));
    at += nameLen;
    const uint64_t size = get<uint64_t>(bytes, at), sum = get<uint64_t>(bytes, at + 8);
    at += 16;
    if (size > bodyEnd - at) return bad("truncated bundle");
    std::string body(bytes.substr(at, size));
    at += size;
    uint64_t hash;
    if (!parseEntryFileName(name, &hash)) return bad("bad entry name in bundle: " + name);
    if (fnv1a(body) != sum) return bad("checksum mismatch for " + name);
    files->emplace_back(std::move(name), std::move(body));
  }
  if (at != bodyEnd) return bad("trailing bytes in bundle");
  return true;
}

std::string signBundle(std::string bundle, std::string_view key) {
  const Digest256 mac = hmacSha256(key, bundle);
  bundle.append(kSignatureMagic, 8);
  bundle.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return bundle;
}

BundleSignature checkBundleSignature(std::string_view bytes, std::string_view key, std::string_view* bundle) {
  *bundle = bytes;
  if (bytes.size() < kSignatureBytes ||
      std::memcmp(bytes.data() + bytes.size() - kSignatureBytes, kSignatureMagic, 8) != 0)
    return BundleSignature::Unsigned;
  *bundle = bytes.substr(0, bytes.size() - kSignatureBytes);
  Digest256 mac;
  std::memcpy(mac.data(), bytes.data() + bytes.size() - 32, 32);
  return equalDigests(mac, hmacSha256(key, *bundle)) ? BundleSignature::Valid : BundleSignature::Invalid;
}

}  // namespace kiln::exec::cache
