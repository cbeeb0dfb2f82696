//===- SharedObjectLinker.cpp - Kernel objects to shared objects ---------===//

#include "jit/targets/cpu/SharedObjectLinker.h"

#include <dlfcn.h>

#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

extern "C" void kiln_rt_parallel_for(void (*body)(void *, int64_t, int64_t), void *ctx, int64_t n, int64_t grain);

namespace kiln::jit::cpu {

namespace {

/// The file libkiln was loaded from (the kernels link against it, so that
/// they find its symbols even where libkiln was opened RTLD_LOCAL).
llvm::Expected<std::string> libkilnPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&kiln_rt_parallel_for), &info) == 0 || !info.dli_fname)
    return llvm::createStringError("cannot find the file libkiln was loaded from");
  return std::string(info.dli_fname);
}

llvm::Expected<std::string> findLinker() {
  for (const char *name : {"cc", "gcc", "clang", "clang-22"})
    if (auto path = llvm::sys::findProgramByName(name))
      return *path;
  return llvm::createStringError("no C compiler driver (cc, gcc or clang) on PATH to link kernels into shared "
                                 "objects; install gcc (Debian: apt-get install gcc)");
}

/// Removes the files it names when it goes out of scope.
struct TempFiles {
  llvm::SmallVector<llvm::SmallString<128>, 3> paths;
  ~TempFiles() {
    for (auto &p : paths)
      llvm::sys::fs::remove(p);
  }
  llvm::Expected<llvm::StringRef> make(llvm::StringRef suffix) {
    llvm::SmallString<128> path;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("kiln-kernel", suffix, path))
      return llvm::createStringError(ec, "cannot create a temporary file");
    paths.push_back(path);
    return paths.back().str();
  }
};

} // namespace

llvm::Expected<std::string> linkSharedObject(llvm::ArrayRef<llvm::StringRef> objects) {
  auto linker = findLinker();
  if (!linker)
    return linker.takeError();
  auto libkiln = libkilnPath();
  if (!libkiln)
    return libkiln.takeError();
  TempFiles files;
  std::vector<std::string> inPaths;
  for (llvm::StringRef object : objects) {
    auto in = files.make("o");
    if (!in)
      return in.takeError();
    inPaths.push_back(in->str());
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
  auto out = files.make("so");
  if (!out)
    return out.takeError();
  auto log = files.make("log");
  if (!log)
    return log.takeError();
  // -Bsymbolic: a kernel's calls between its own functions never go to
  // another kernel's function of the same name.
  std::string outPath = out->str();
  // The driver's usual start files stay, and -lc comes again after libkiln:
  // a sanitizer build of libkiln leaves atexit undefined, which pulls
  // libc_nonshared's atexit (it needs crtbeginS's __dso_handle and libc's
  // __cxa_atexit) into the kernel.
  llvm::SmallVector<llvm::StringRef, 16> args = {*linker, "-shared", "-o", outPath};
  args.append(inPaths.begin(), inPaths.end());
  args.append({"-Wl,-Bsymbolic", "-Wl,--no-undefined", *libkiln, "-lm", "-lc"});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, *log, *log};
  std::string message;
  const int rc = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, redirects, /*SecondsToWait=*/60,
                                           /*MemoryLimit=*/0, &message);
  if (rc != 0) {
    std::string output;
    if (auto buf = llvm::MemoryBuffer::getFile(*log))
      output = (*buf)->getBuffer().take_front(2000).str();
    return llvm::createStringError("linking the kernel into a shared object failed (" + *linker + ", exit " +
                                   std::to_string(rc) + (message.empty() ? "" : ": " + message) + "): " + output);
  }
  auto buf = llvm::MemoryBuffer::getFile(*out, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read the linked kernel");
  return (*buf)->getBuffer().str();
}

} // namespace kiln::jit::cpu
