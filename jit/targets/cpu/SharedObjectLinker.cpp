//===- SharedObjectLinker.cpp - Kernel objects to shared objects ---------===//

#include "jit/targets/cpu/SharedObjectLinker.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <ctime>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "llvm/ADT/SmallString.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

extern "C" void kiln_rt_parallel_for(void (*body)(void *, int64_t, int64_t), void *ctx, int64_t n, int64_t grain);

namespace kiln::jit::cpu {

namespace {

/// The file of the loaded library that defines the function at `address`.
llvm::Expected<std::string> loadedFileOf(const void *address, const char *library) {
  Dl_info info;
  if (dladdr(address, &info) == 0 || !info.dli_fname)
    return llvm::createStringError(std::string("cannot find the file ") + library + " was loaded from");
  return std::string(info.dli_fname);
}

/// The file libkiln was loaded from (the kernels link against it, so that
/// they find its symbols even where libkiln was opened RTLD_LOCAL).
llvm::Expected<std::string> libkilnPath() {
  return loadedFileOf(reinterpret_cast<const void *>(&kiln_rt_parallel_for), "libkiln");
}

/// Runs `args` (args[0] the program), its output to `log`; the error says
/// what failed and what it printed.
llvm::Error run(llvm::ArrayRef<llvm::StringRef> args, llvm::StringRef log) {
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  std::string message;
  const int rc = llvm::sys::ExecuteAndWait(args[0], args, std::nullopt, redirects, /*SecondsToWait=*/60,
                                           /*MemoryLimit=*/0, &message);
  if (rc == 0)
    return llvm::Error::success();
  std::string output;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    output = (*buf)->getBuffer().take_front(2000).str();
  return llvm::createStringError("linking the kernel into a shared object failed (" + args[0].str() + ", exit " +
                                 std::to_string(rc) + (message.empty() ? "" : ": " + message) + "): " + output);
}

/// The prefixes of the link's temporary files, each followed by "-<pid>-"
/// of the process that made it (stale ones: removeStaleLinkFiles).
constexpr const char *kTempPrefixes[] = {"kiln-kernel", "kiln-soname"};

std::string tempPrefix(const char *kind) { return std::string(kind) + "-" + std::to_string(::getpid()); }

/// Removes the files it names when it goes out of scope.
struct TempFiles {
  llvm::SmallVector<llvm::SmallString<128>, 3> paths;
  ~TempFiles() {
    for (auto &p : paths)
      llvm::sys::fs::remove(p);
  }
  /// A new file's path (a copy: the next make() may move `paths`).
  llvm::Expected<std::string> make(llvm::StringRef suffix) {
    llvm::SmallString<128> path;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(tempPrefix("kiln-kernel"), suffix, path))
      return llvm::createStringError(ec, "cannot create a temporary file");
    paths.push_back(path);
    return std::string(path.str());
  }
};

/// Writes `objects` to temporary files (kept in `files`) and returns their paths.
llvm::Expected<std::vector<std::string>> writeObjects(llvm::ArrayRef<llvm::StringRef> objects, TempFiles &files) {
  std::vector<std::string> inPaths;
  for (llvm::StringRef object : objects) {
    auto in = files.make("o");
    if (!in)
      return in.takeError();
    inPaths.push_back(std::move(*in));
    std::error_code ec;
    llvm::raw_fd_ostream os(inPaths.back(), ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write the kernel object");
    os << object;
    os.close();
    if (os.has_error()) {
      std::error_code writeError = os.error();
      os.clear_error();  // reported here, not by a fatal error in the stream's destructor
      return llvm::createStringError(writeError, "cannot write the kernel object");
    }
  }
  return inPaths;
}

/// The smallest relocatable ELF object for this machine: no sections but
/// the section names. ld makes a shared object of it (a SONAME and nothing
/// else) and needs an ELF input for that.
std::string emptyRelocatableObject() {
  static const char names[] = "\0.shstrtab";  // 11 bytes with the final NUL
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = ET_REL;
  header.e_machine = EM_X86_64;
  header.e_version = EV_CURRENT;
  header.e_ehsize = sizeof(Elf64_Ehdr);
  header.e_shentsize = sizeof(Elf64_Shdr);
  header.e_shnum = 2;
  header.e_shstrndx = 1;
  const size_t namesSize = sizeof(names), padded = (namesSize + 7) & ~size_t{7};
  header.e_shoff = sizeof(Elf64_Ehdr) + padded;
  Elf64_Shdr sections[2]{};
  sections[1].sh_name = 1;
  sections[1].sh_type = SHT_STRTAB;
  sections[1].sh_offset = sizeof(Elf64_Ehdr);
  sections[1].sh_size = namesSize;
  sections[1].sh_addralign = 1;
  std::string bytes(reinterpret_cast<const char *>(&header), sizeof header);
  bytes.append(names, namesSize);
  bytes.append(padded - namesSize, '\0');
  bytes.append(reinterpret_cast<const char *>(sections), sizeof sections);
  return bytes;
}

/// What the direct link needs, found once per process: the linker, the
/// loaded libkiln and libm, whose handles resolve a kernel's symbols as
/// dlopen will (a library's handle also searches its dependencies: libc),
/// and what the kernels link against.
struct DirectLink {
  std::string ld, libkiln, libm;
  void *kilnHandle = nullptr, *mathHandle = nullptr;
  /// A shared object with libkiln's SONAME and nothing else (see
  /// makeSonameStub), removed at exit; empty if it could not be made.
  std::string sonameStub;
  bool usable = false;

  ~DirectLink() {
    if (!sonameStub.empty())
      llvm::sys::fs::remove(sonameStub);
  }
  /// The libraries a kernel links against.
  llvm::SmallVector<llvm::StringRef, 2> libraries() const {
    if (!sonameStub.empty())
      return {sonameStub};
    return {libkiln, libm};
  }
};

/// Reading libkiln's and libm's symbol tables was most of ld's time (9 of
/// 12 ms per kernel, more than the codegen of a small trace). A kernel only
/// needs its DT_NEEDED entry for libkiln, which dlopen matches to the loaded
/// libkiln by SONAME even where that was opened RTLD_LOCAL; libm comes with
/// libkiln's own dependencies, which dlopen also searches. So the kernels
/// link against a stub with libkiln's SONAME and no symbols (ld -shared
/// leaves their references to libkiln and libm undefined; unresolvedSymbols()
/// checks each against the real libraries): 3 ms per link.
std::string makeSonameStub(const std::string &ld) {
  TempFiles files;  // the empty object and the log
  auto objects = writeObjects({emptyRelocatableObject()}, files);
  auto log = files.make("log");
  llvm::SmallString<128> stub;
  if (!objects || !log || llvm::sys::fs::createTemporaryFile(tempPrefix("kiln-soname"), "so", stub)) {
    llvm::consumeError(objects.takeError());
    llvm::consumeError(log.takeError());
    return {};
  }
  llvm::StringRef args[] = {ld, "-shared", "-soname", KILN_RUNTIME_SONAME, "-o", stub, objects->front()};
  if (llvm::Error e = run(args, *log)) {
    llvm::consumeError(std::move(e));
    llvm::sys::fs::remove(stub);
    return {};
  }
  return std::string(stub.str());
}

const DirectLink &directLink() {
  static const DirectLink link = [] {
    // A killed process leaves its link files (and its SONAME stub) behind.
    llvm::SmallString<128> tmp;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, tmp);
    removeStaleLinkFiles(std::string(tmp.str()), kStaleLinkFileAge);
    DirectLink l;
    auto ld = llvm::sys::findProgramByName("ld");
    float (*const tanhFn)(float) = &::tanhf;
    auto libkiln = libkilnPath();
    auto libm = loadedFileOf(reinterpret_cast<const void *>(tanhFn), "libm");
    if (!ld || !libkiln || !libm) {
      llvm::consumeError(libkiln.takeError());
      llvm::consumeError(libm.takeError());
      return l;
    }
    l.ld = *ld;
    l.libkiln = *libkiln;
    l.libm = *libm;
    l.kilnHandle = dlopen(l.libkiln.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    l.mathHandle = dlopen(l.libm.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    l.usable = l.kilnHandle && l.mathHandle;
    if (l.usable)
      l.sonameStub = makeSonameStub(l.ld);
    return l;
  }();
  return link;
}

/// The symbols the objects need from outside them that neither libkiln nor
/// libm (with their dependencies) defines: the checks --no-undefined made.
llvm::Expected<std::vector<std::string>> unresolvedSymbols(llvm::ArrayRef<llvm::StringRef> objects,
                                                           const DirectLink &link) {
  std::set<std::string> defined, needed;
  for (llvm::StringRef bytes : objects) {
    auto object = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, "kernel"));
    if (!object)
      return object.takeError();
    for (const llvm::object::SymbolRef &symbol : (*object)->symbols()) {
      auto name = symbol.getName();
      auto flags = symbol.getFlags();
      if (!name || !flags) {
        llvm::consumeError(name.takeError());
        llvm::consumeError(flags.takeError());
        continue;
      }
      if (name->empty())
        continue;
      (*flags & llvm::object::SymbolRef::SF_Undefined ? needed : defined).insert(name->str());
    }
  }
  std::vector<std::string> missing;
  for (const std::string &name : needed)
    if (!defined.count(name) && name != "_GLOBAL_OFFSET_TABLE_" && !dlsym(link.kilnHandle, name.c_str()) &&
        !dlsym(link.mathHandle, name.c_str()))
      missing.push_back(name);
  return missing;
}

llvm::Expected<std::string> findLinker() {
  for (const char *name : {"cc", "gcc", "clang", "clang-22"})
    if (auto path = llvm::sys::findProgramByName(name))
      return *path;
  return llvm::createStringError("no C compiler driver (cc, gcc or clang) on PATH to link kernels into shared "
                                 "objects; install gcc (Debian: apt-get install gcc)");
}

llvm::Expected<std::string> readFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read the linked kernel");
  return (*buf)->getBuffer().str();
}

/// The files of one link: the objects written out, the shared object's
/// path and the linker's log (removed with `files`).
struct LinkFiles {
  std::vector<std::string> inPaths;
  std::string outPath, logPath;
};

llvm::Expected<LinkFiles> prepareLink(llvm::ArrayRef<llvm::StringRef> objects, TempFiles &files) {
  auto inPaths = writeObjects(objects, files);
  if (!inPaths)
    return inPaths.takeError();
  auto out = files.make("so");
  if (!out)
    return out.takeError();
  auto log = files.make("log");
  if (!log)
    return log.takeError();
  return LinkFiles{std::move(*inPaths), std::move(*out), std::move(*log)};
}

/// ld alone, against the SONAME stub (or, without one, the loaded libkiln
/// and libm by file): the C compiler driver runs three programs and has ld
/// read libc's and libgcc's symbol tables, about 35 ms of a 60 ms compile of
/// a small trace, where this takes about 3 (10 against the real libraries).
/// libc stays out (every process has it in its global scope), so
/// --no-undefined cannot check a kernel's symbols; unresolvedSymbols() does,
/// against what dlopen will search. Without a usable ld, or where it fails
/// (a runtime routine only libgcc has), the driver links.
llvm::Expected<std::string> linkDirectly(llvm::ArrayRef<llvm::StringRef> objects, const DirectLink &link) {
  auto missing = unresolvedSymbols(objects, link);
  if (!missing)
    return missing.takeError();
  if (!missing->empty())
    return llvm::createStringError("the kernel needs " + (*missing)[0] + ", which neither libkiln nor libm defines");
  TempFiles files;
  auto paths = prepareLink(objects, files);
  if (!paths)
    return paths.takeError();
  llvm::SmallVector<llvm::StringRef, 16> args = {link.ld, "-shared", "-o", paths->outPath};
  args.append(paths->inPaths.begin(), paths->inPaths.end());
  args.append({"-Bsymbolic", "--eh-frame-hdr", "--hash-style=gnu", "-z", "noexecstack"});
  for (llvm::StringRef library : link.libraries())
    args.push_back(library);
  if (llvm::Error e = run(args, paths->logPath))
    return e;
  return readFile(paths->outPath);
}

/// The C compiler driver's link (the fallback).
llvm::Expected<std::string> linkWithDriver(llvm::ArrayRef<llvm::StringRef> objects) {
  auto linker = findLinker();
  if (!linker)
    return linker.takeError();
  auto libkiln = libkilnPath();
  if (!libkiln)
    return libkiln.takeError();
  TempFiles files;
  auto paths = prepareLink(objects, files);
  if (!paths)
    return paths.takeError();
  // -Bsymbolic: a kernel's calls between its own functions never go to
  // another kernel's function of the same name.
  // The driver's usual start files stay, and -lc comes again after libkiln:
  // a sanitizer build of libkiln leaves atexit undefined, which pulls
  // libc_nonshared's atexit (it needs crtbeginS's __dso_handle and libc's
  // __cxa_atexit) into the kernel.
  llvm::SmallVector<llvm::StringRef, 16> args = {*linker, "-shared", "-o", paths->outPath};
  args.append(paths->inPaths.begin(), paths->inPaths.end());
  args.append({"-Wl,-Bsymbolic", "-Wl,--no-undefined", *libkiln, "-lm", "-lc"});
  if (llvm::Error e = run(args, paths->logPath))
    return e;
  return readFile(paths->outPath);
}

} // namespace

void prepareSharedObjectLinker() { (void)directLink(); }

int removeStaleLinkFiles(const std::string &dir, std::chrono::seconds minAge) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return 0;
  int removed = 0;
  const time_t cutoff = std::time(nullptr) - static_cast<time_t>(minAge.count());
  while (dirent *e = ::readdir(d)) {
    const std::string name = e->d_name;
    for (const char *kind : kTempPrefixes) {
      const std::string prefix = std::string(kind) + "-";
      if (name.compare(0, prefix.size(), prefix) != 0)
        continue;
      // "<kind>-<pid>-...": files named before the pid was part of the name
      // cannot be told apart from a live process's and stay.
      size_t at = prefix.size(), end = at;
      while (end < name.size() && end - at < 10 && name[end] >= '0' && name[end] <= '9')
        ++end;
      if (end == at || end >= name.size() || name[end] != '-')
        break;
      const long pid = std::stol(name.substr(at, end - at));
      // A process that still runs (or that this user may not signal) keeps them.
      if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
        break;
      const std::string path = dir + "/" + name;
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
          st.st_mtime < cutoff && ::unlink(path.c_str()) == 0)
        ++removed;
      break;
    }
  }
  ::closedir(d);
  return removed;
}

llvm::Expected<std::string> linkSharedObject(llvm::ArrayRef<llvm::StringRef> objects) {
  const DirectLink &link = directLink();
  if (link.usable) {
    auto shared = linkDirectly(objects, link);
    if (shared)
      return shared;
    llvm::consumeError(shared.takeError());  // the driver links it, or says why it cannot
  }
  return linkWithDriver(objects);
}

} // namespace kiln::jit::cpu
