// kiln-cache: list, check and manage the disk kernel cache (KILN_CACHE_DIR).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/cache/CacheEntryCheck.h"
#include "runtime/exec/Executable.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/cache/KernelCache.h"

namespace cache = kiln::exec::cache;

namespace {

const char* kUsage =
    "usage: kiln-cache [--dir DIR] COMMAND [ARGS]\n"
    "\n"
    "Inspects and manages Kiln's disk kernel cache (default: KILN_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln).\n"
    "\n"
    "commands:\n"
    "  list                 one line per entry: key hash, ops, inputs, device, size, compile ms, last use\n"
    "  stats                entries, bytes, fingerprints, this host's fingerprint\n"
    "  verify               checks every entry; exit status 1 when any is bad\n"
    "  explain [HASH]       whether each entry (or those of trace HASH) loads on this host, and if not why\n"
    "  prune --max-mb N | --older-than D\n"
    "                       removes least recently used entries beyond N MiB, or entries unused for D\n"
    "                       (D: a number with s, m, h or d)\n"
    "  clear                removes every entry\n"
    "  export FILE [--all]  packs this host's entries (or all) into one bundle with checksums\n"
    "                       (signed with the key, if one is given)\n"
    "  import FILE          verifies a bundle (and its signature, if a key is given) and adds its entries\n"
    "\n"
    "--key KEYFILE (or KILN_CACHE_KEY=KEYFILE): a secret of at least 16 bytes. export signs the bundle\n"
    "with it (HMAC-SHA256); import then accepts only bundles signed with it.\n"
    "\n"
    "`kiln-cache COMMAND --help` describes one command.\n";

std::map<std::string, std::string> kHelp = {
    {"list", "usage: kiln-cache list\n  One line per entry: key hash, fingerprint digest, device, size, compile ms, "
             "last use, ops and input shapes.\n"},
    {"stats", "usage: kiln-cache stats\n  Entry count and bytes, per fingerprint, and this host's fingerprint.\n"},
    {"verify", "usage: kiln-cache verify\n  Reads every entry in full and checks its header, checksums, metadata and "
               "name. Prints each bad entry; exit status 1 if any.\n"},
    {"explain", "usage: kiln-cache explain [HASH]\n  For each entry (or those whose key hash starts with HASH): "
                "whether this host would load it, and if not which part of the compiler fingerprint differs "
                "(LLVM version, CPU, a CPU feature, the pipeline).\n"},
    {"prune", "usage: kiln-cache prune --max-mb N | --older-than D\n  --max-mb N: removes least recently used "
              "entries until the cache holds at most N MiB.\n  --older-than D: removes entries unused for D (e.g. "
              "90s, 30m, 12h, 7d).\n"},
    {"clear", "usage: kiln-cache clear\n  Removes every entry (and leftover temporary files).\n"},
    {"export", "usage: kiln-cache export FILE [--all] [--key KEYFILE]\n  Packs the entries compiled for this host's fingerprint "
               "(or all with --all) into FILE, with a checksum per entry and for the whole bundle.\n"},
    {"import", "usage: kiln-cache import FILE [--key KEYFILE]\n  With a key (--key or KILN_CACHE_KEY), refuses FILE unless it is "
               "signed with that key. Verifies FILE's checksums and every entry in it, then adds the "
               "entries to the cache directory (created private if missing).\n"},
};

struct Item {
  std::string name, path;
  struct stat st;
};

std::vector<Item> entries(const std::string& dir) {
  std::vector<Item> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    uint64_t hash;
    while (dirent* e = ::readdir(d)) {
      if (!cache::parseEntryFileName(e->d_name, &hash)) continue;
      Item it{e->d_name, dir + "/" + e->d_name, {}};
      if (::lstat(it.path.c_str(), &it.st) == 0) out.push_back(it);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const Item& a, const Item& b) { return a.name < b.name; });
  return out;
}

bool requireDir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "kiln-cache: no kernel cache directory at %s\n", dir.c_str());
    return false;
  }
  return true;
}

std::string age(time_t t) {
  const long s = static_cast<long>(std::time(nullptr) - t);
  char b[32];
  if (s < 120) std::snprintf(b, sizeof(b), "%lds ago", s);
  else if (s < 7200) std::snprintf(b, sizeof(b), "%ldm ago", s / 60);
  else if (s < 172800) std::snprintf(b, sizeof(b), "%ldh ago", s / 3600);
  else std::snprintf(b, sizeof(b), "%ldd ago", s / 86400);
  return b;
}


/// The largest entry this tool reads (see cache::readFile: FIFOs, links
/// and devices are refused unread).
uint64_t maxEntryBytes() { return cache::maxEntryBytes(kiln::settings().cache_max_mb); }

/// Reads an entry's header and metadata; false with `*error`.
bool readHead(const Item& it, cache::Entry* e, std::string* error) {
  std::string bytes;
  return cache::readEntryHead(it.path, maxEntryBytes(), &bytes, error) && cache::decode(bytes, e, error, true);
}

/// Full verification of decoded entry bytes filed as `name`; "" when good.
std::string checkEntry(const std::string& name, const cache::Entry& e) {
  if (name != cache::entryFileName(e.meta.keyHash, e.meta.fingerprint))
    return "its name does not match its contents (a renamed or swapped file)";
  if (std::string why = cache::checkMetadata(e.meta, e.meta.keyHash); !why.empty())
    return "its metadata does not fit its trace: " + why;
  return {};
}

/// Full verification of one entry file; "" when good. `*bytes` receives it.
std::string check(const Item& it, std::string* bytes = nullptr) {
  std::string own, error;
  if (!bytes) bytes = &own;
  struct stat st;
  if (!cache::readFile(it.path, maxEntryBytes(), bytes, &error, false, &st)) return error;
  if (st.st_uid != ::geteuid()) return "not owned by this user";
  cache::Entry e;
  if (!cache::decode(*bytes, &e, &error)) return error;
  return checkEntry(it.name, e);
}

int cmdList(const std::string& dir) {
  if (!requireDir(dir)) return 2;
  std::printf("%-16s %-8s %-6s %10s %10s %-7s %-10s %s\n", "key", "target", "device", "bytes", "compile_ms", "codegen",
              "last_use", "ops / inputs");
  for (const Item& it : entries(dir)) {
    std::string error;
    cache::Entry e;
    if (!readHead(it, &e, &error)) {
      std::printf("%s  BAD: %s\n", it.name.c_str(), error.c_str());
      continue;
    }
    std::printf("%016llx %-8s %-6s %10lld %10.1f %-7s %-10s %s / %s\n", static_cast<unsigned long long>(e.meta.keyHash),
                cache::fingerprintDigest(e.meta.fingerprint).c_str(), e.meta.device.c_str(),
                static_cast<long long>(it.st.st_size), e.meta.compileMs, kiln::exec::codegenEffortName(e.meta.codegen),
                age(it.st.st_mtime).c_str(), e.meta.ops.c_str(), e.meta.inputs.c_str());
  }
  return 0;
}

int cmdStats(const std::string& dir) {
  if (!requireDir(dir)) return 2;
  std::map<std::string, std::pair<int, long long>> byFp;
  long long total = 0;
  int count = 0, bad = 0;
  for (const Item& it : entries(dir)) {
    ++count;
    total += it.st.st_size;
    std::string error;
    cache::Entry e;
    if (!readHead(it, &e, &error)) {
      ++bad;
      continue;
    }
    auto& slot = byFp[e.meta.fingerprint];
    ++slot.first;
    slot.second += it.st.st_size;
  }
  // Temporary files of writers still writing, or killed while writing.
  int temps = 0;
  long long tempBytes = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      struct stat st;
      if (std::strncmp(e->d_name, cache::kTempPrefix, std::strlen(cache::kTempPrefix)) != 0 ||
          ::lstat((dir + "/" + e->d_name).c_str(), &st) != 0)
        continue;
      ++temps;
      tempBytes += st.st_size;
    }
    ::closedir(d);
  }
  const std::string host = kiln::exec::hostFingerprint();
  std::printf("directory %s\nentries %d\nbytes %lld\nunreadable %d\ntemporary %d (%lld bytes)\nlimit_mb %lld\n",
              dir.c_str(), count, total, bad, temps, tempBytes, static_cast<long long>(kiln::settings().cache_max_mb));
  const std::string why = kiln::exec::checkCacheDirectory(dir);
  std::printf("trusted %s\n", why.empty() ? "yes" : ("no: " + why).c_str());
  for (const auto& [fp, v] : byFp) {
    // A GPU's fingerprint names its target and device; the host's its CPU.
    const std::string gpu = cache::fingerprintField(fp, "target");
    const std::string device = cache::fingerprintField(fp, "device");
    const std::string what = gpu.empty() ? "cpu " + cache::fingerprintField(fp, "cpu")
                                         : gpu + (device.empty() ? "" : ", device " + device);
    std::printf("target %s: %d entries, %lld bytes%s (llvm %s, %s)\n", cache::fingerprintDigest(fp).c_str(), v.first,
                v.second, fp == host ? ", this host" : "", cache::fingerprintField(fp, "llvm").c_str(), what.c_str());
  }
  if (!host.empty()) std::printf("host target %s\n", cache::fingerprintDigest(host).c_str());
  return 0;
}

int cmdVerify(const std::string& dir) {
  if (!requireDir(dir)) return 2;
  int bad = 0, good = 0;
  for (const Item& it : entries(dir)) {
    const std::string why = check(it);
    if (why.empty()) {
      ++good;
      continue;
    }
    ++bad;
    std::printf("BAD %s: %s\n", it.name.c_str(), why.c_str());
  }
  std::printf("%d good, %d bad\n", good, bad);
  return bad ? 1 : 0;
}

int cmdExplain(const std::string& dir, const std::string& prefix) {
  if (!requireDir(dir)) return 2;
  const std::string host = kiln::exec::hostFingerprint();
  if (std::string why = kiln::exec::checkCacheDirectory(dir); !why.empty())
    std::printf("nothing loads from this directory: %s\n", why.c_str());
  int shown = 0;
  for (const Item& it : entries(dir)) {
    if (!prefix.empty() && it.name.rfind(prefix, 0) != 0) continue;
    ++shown;
    const std::string bad = check(it);
    if (!bad.empty()) {
      std::printf("%s: bad entry (%s)\n", it.name.c_str(), bad.c_str());
      continue;
    }
    std::string error;
    cache::Entry e;
    if (!readHead(it, &e, &error)) {
      std::printf("%s: bad entry (%s)\n", it.name.c_str(), error.c_str());
      continue;
    }
    if (e.meta.format != kiln::exec::BinaryFormat::SharedObject) {
      // A GPU kernel loads in a process that has its device, if this build
      // of Kiln made it (the tool opens no device).
      std::string stale;
      for (const char* field : {"kiln", "llvm", "pipeline"}) {
        const std::string want = cache::fingerprintField(host, field);
        const std::string have = cache::fingerprintField(e.meta.fingerprint, field);
        if (want != have) {
          stale = std::string(field) + ": cached by '" + have + "', this Kiln has '" + want + "'";
          break;
        }
      }
      const std::string device = cache::fingerprintField(e.meta.fingerprint, "device");
      std::printf("%s (%s): a %s kernel for %s%s: %s\n", it.name.c_str(), e.meta.ops.c_str(), e.meta.device.c_str(),
                  cache::fingerprintField(e.meta.fingerprint, "target").c_str(),
                  device.empty() ? "" : (" (" + device + ")").c_str(),
                  stale.empty() ? "loads on such a device" : ("another Kiln build made it: " + stale).c_str());
      continue;
    }
    const std::string diff = cache::describeDifference(e.meta.keyWords, host, e.meta.keyWords, e.meta.fingerprint);
    std::printf("%s (%s): %s\n", it.name.c_str(), e.meta.ops.c_str(),
                diff.empty() ? "loads on this host" : ("not for this host: " + diff).c_str());
  }
  if (!shown) std::printf("no entries%s\n", prefix.empty() ? "" : (" for " + prefix).c_str());
  return 0;
}

int removeAll(const std::vector<Item>& items) {
  int n = 0;
  for (const Item& it : items) n += ::unlink(it.path.c_str()) == 0;
  return n;
}

int cmdPrune(const std::string& dir, const std::vector<std::string>& args) {
  if (!requireDir(dir)) return 2;
  if (args.size() != 2 || (args[0] != "--max-mb" && args[0] != "--older-than")) {
    std::fputs(kHelp["prune"].c_str(), stderr);
    return 2;
  }
  std::vector<Item> items = entries(dir);
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.st.st_mtime < b.st.st_mtime; });
  std::vector<Item> doomed;
  char* end = nullptr;
  const double x = std::strtod(args[1].c_str(), &end);
  if (end == args[1].c_str() || x < 0) {
    std::fprintf(stderr, "kiln-cache prune: bad value '%s'\n", args[1].c_str());
    return 2;
  }
  if (args[0] == "--max-mb") {
    long long total = 0;
    for (const Item& it : items) total += it.st.st_size;
    const long long limit = static_cast<long long>(x * 1024 * 1024);
    for (const Item& it : items) {
      if (total <= limit) break;
      doomed.push_back(it);
      total -= it.st.st_size;
    }
  } else {
    double unit = 1;
    switch (*end) {
      case 's': case '\0': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default:
        std::fprintf(stderr, "kiln-cache prune: bad duration '%s' (use s, m, h or d)\n", args[1].c_str());
        return 2;
    }
    const time_t cutoff = std::time(nullptr) - static_cast<time_t>(x * unit);
    for (const Item& it : items)
      if (it.st.st_mtime < cutoff) doomed.push_back(it);
  }
  std::printf("removed %d of %zu entries\n", removeAll(doomed), items.size());
  return 0;
}

int cmdClear(const std::string& dir) {
  if (!requireDir(dir)) return 2;
  int n = removeAll(entries(dir));
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, cache::kTempPrefix, std::strlen(cache::kTempPrefix)) == 0)
        ::unlink((dir + "/" + e->d_name).c_str());
    ::closedir(d);
  }
  std::printf("removed %d entries\n", n);
  return 0;
}

/// The bundle signing key: --key KEYFILE, else KILN_CACHE_KEY; "" for none.
/// False (with a message) when a named key cannot be used.
bool loadKey(const std::string& keyPath, std::string* key) {
  key->clear();
  if (keyPath.empty()) return true;
  std::string error;
  if (!cache::readFile(keyPath, 1 << 20, key, &error, /*followLinks=*/true)) {
    std::fprintf(stderr, "kiln-cache: cannot read the key %s: %s\n", keyPath.c_str(), error.c_str());
    return false;
  }
  if (key->size() < 16) {
    std::fprintf(stderr, "kiln-cache: the key %s has %zu bytes; use a secret of at least 16 random bytes (e.g. `head "
                         "-c 32 /dev/urandom > KEYFILE`)\n",
                 keyPath.c_str(), key->size());
    return false;
  }
  return true;
}

int cmdExport(const std::string& dir, const std::vector<std::string>& args, const std::string& key) {
  if (!requireDir(dir)) return 2;
  if (args.empty() || args.size() > 2 || (args.size() == 2 && args[1] != "--all")) {
    std::fputs(kHelp["export"].c_str(), stderr);
    return 2;
  }
  const bool all = args.size() == 2;
  const std::string host = all ? std::string() : kiln::exec::hostFingerprint();
  std::vector<std::pair<std::string, std::string>> files;
  for (const Item& it : entries(dir)) {
    std::string bytes, error;
    if (!check(it, &bytes).empty()) continue;  // never ship a bad entry
    cache::Entry e;
    if (!cache::decode(bytes, &e, &error) || (!all && e.meta.fingerprint != host)) continue;
    files.emplace_back(it.name, std::move(bytes));
  }
  std::string error;
  std::string out = args[0];
  const auto slash = out.rfind('/');
  const std::string outDir = slash == std::string::npos ? "." : out.substr(0, slash);
  std::string bundle = cache::encodeBundle(files);
  if (!key.empty()) bundle = cache::signBundle(std::move(bundle), key);
  if (!cache::writeFileAtomic(outDir, out.substr(slash + 1), bundle, &error)) {
    std::fprintf(stderr, "kiln-cache export: cannot write %s: %s\n", out.c_str(), error.c_str());
    return 1;
  }
  std::printf("exported %zu entries to %s%s\n", files.size(), out.c_str(), key.empty() ? "" : " (signed)");
  return 0;
}

int cmdImport(const std::string& dir, const std::vector<std::string>& args, const std::string& key) {
  if (args.size() != 1) {
    std::fputs(kHelp["import"].c_str(), stderr);
    return 2;
  }
  std::string bytes, error;
  if (!cache::readFile(args[0], cache::kMaxBundleBytes, &bytes, &error, /*followLinks=*/true)) {
    std::fprintf(stderr, "kiln-cache import: cannot read %s: %s\n", args[0].c_str(), error.c_str());
    return 1;
  }
  // The cache directory holds native code this user runs: with a key, only
  // bundles its holder signed may enter it.
  std::string_view body;
  const cache::BundleSignature signature = cache::checkBundleSignature(bytes, key, &body);
  if (!key.empty() && signature != cache::BundleSignature::Valid) {
    std::fprintf(stderr, "kiln-cache import: refusing %s: %s\n", args[0].c_str(),
                 signature == cache::BundleSignature::Unsigned
                     ? "it is not signed, and a key was given (sign it with `kiln-cache export FILE --key KEYFILE`)"
                     : "its signature does not match the key (another key, or the bundle was changed after signing)");
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!cache::decodeBundle(body, &files, &error)) {
    std::fprintf(stderr, "kiln-cache import: %s is not a valid bundle: %s\n", args[0].c_str(), error.c_str());
    return 1;
  }
  for (const auto& [name, body] : files) {
    cache::Entry e;
    std::string why;
    if (body.size() > maxEntryBytes())
      why = "larger than an entry may be (" + std::to_string(body.size()) + " bytes)";
    else if (!cache::decode(body, &e, &error))
      why = error;
    else
      why = checkEntry(name, e);
    if (!why.empty()) {
      std::fprintf(stderr, "kiln-cache import: entry %s in %s is bad (%s); nothing imported\n", name.c_str(),
                   args[0].c_str(), why.c_str());
      return 1;
    }
  }
  std::string partial;
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (!partial.empty()) ::mkdir(partial.c_str(), 0700);
  }
  if (std::string why = kiln::exec::checkCacheDirectory(dir); !why.empty()) {
    std::fprintf(stderr, "kiln-cache import: refusing: %s\n", why.c_str());
    return 1;
  }
  for (const auto& [name, body] : files) {
    if (!cache::writeFileAtomic(dir, name, body, &error)) {
      std::fprintf(stderr, "kiln-cache import: cannot write %s/%s: %s\n", dir.c_str(), name.c_str(), error.c_str());
      return 1;
    }
  }
  std::printf("imported %zu entries into %s%s\n", files.size(), dir.c_str(),
              !key.empty()                                       ? " (signature verified)"
              : signature == cache::BundleSignature::Unsigned ? ""
                                                              : " (signature not checked: no key given)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string dir = kiln::settings().cache_dir;
  if (args.size() >= 2 && args[0] == "--dir") {
    dir = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (!kHelp.count(cmd)) {
    std::fprintf(stderr, "kiln-cache: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return 2;
  }
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(kHelp[cmd].c_str(), stdout);
    return 0;
  }
  std::string keyPath;
  if (const char* env = std::getenv("KILN_CACHE_KEY")) keyPath = env;
  if (auto it = std::find(args.begin(), args.end(), "--key"); it != args.end()) {
    if (it + 1 == args.end()) {
      std::fputs(kHelp[cmd].c_str(), stderr);
      return 2;
    }
    keyPath = *(it + 1);
    args.erase(it, it + 2);
  }
  if (dir.empty()) {
    std::fprintf(stderr, "kiln-cache: no cache directory (set KILN_CACHE_DIR or use --dir)\n");
    return 2;
  }
  if (cmd == "list") return cmdList(dir);
  if (cmd == "stats") return cmdStats(dir);
  if (cmd == "verify") return cmdVerify(dir);
  if (cmd == "explain") return cmdExplain(dir, args.empty() ? "" : args[0]);
  if (cmd == "prune") return cmdPrune(dir, args);
  if (cmd == "clear") return cmdClear(dir);
  std::string key;
  if ((cmd == "export" || cmd == "import") && !loadKey(keyPath, &key)) return 2;
  if (cmd == "export") return cmdExport(dir, args, key);
  return cmdImport(dir, args, key);
}
