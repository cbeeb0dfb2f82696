// The kernel loader: compiled kernels are ELF shared objects (linked by the
// compiler when it builds them), mapped with the system's dynamic loader. No
// LLVM: a process that replays cached kernels maps neither libLLVM nor
// libMLIR, and its first step runs compiled as soon as dlopen returns.
//
// The bytes go into an anonymous memory file (memfd) that dlopen maps
// through /proc/self/fd; the file stays open while the kernel is loaded, so
// no later kernel can get the same path (glibc would return the earlier
// library for it). Without memfd, or past the process's file limit, a
// private temporary file with a unique name serves instead.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/exec/Executable.h"
#include "runtime/cache/HostFingerprint.h"

namespace kiln::exec {

namespace {

bool writeAll(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

class SharedObjectKernel final : public Executable {
 public:
  SharedObjectKernel(void* handle, int fd, void (*entry)(void**), std::size_t scratch, int kernels)
      : handle_(handle), fd_(fd), entry_(entry), scratch_(scratch), kernels_(kernels) {}
  ~SharedObjectKernel() override {
    dlclose(handle_);
    if (fd_ >= 0) ::close(fd_);
  }
  void launch(void** args) const override { entry_(args); }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return kernels_; }

 private:
  void* handle_;
  int fd_;  ///< the memfd behind the mapping's path (-1: a temporary file, already removed)
  void (*entry_)(void**);
  std::size_t scratch_;
  int kernels_;
};

class SharedObjectLoader final : public KernelLoader {
 public:
  const std::string& fingerprint() const override { return hostFingerprint(); }

  std::shared_ptr<Executable> load(const KernelImage& image, std::string* error) override {
    if (image.format != BinaryFormat::SharedObject) {
      *error = std::string("the host's loader maps shared objects, not ") + binaryFormatName(image.format);
      return nullptr;
    }
    const std::string object(image.object);
    const std::string& entry = image.entry;
    int fd = -1;
    void* handle = nullptr;
    if (!openFromMemfd(object, &handle, &fd, error)) handle = openFromTemporaryFile(object, error);
    if (!handle) return nullptr;
    auto* fn = reinterpret_cast<void (*)(void**)>(dlsym(handle, entry.c_str()));
    if (!fn) {
      *error = "the kernel has no entry symbol " + entry;
      dlclose(handle);
      if (fd >= 0) ::close(fd);
      return nullptr;
    }
    return std::make_shared<SharedObjectKernel>(handle, fd, fn, image.scratchBytes, std::max(image.kernelCount, 1));
  }

 private:
  /// Maps `object` through a memfd: true when that was tried to the end
  /// (`*handle` null and `*error` set if dlopen refused the bytes); false
  /// when no memfd could be used here (no memfd, no /proc, no descriptor left).
  static bool openFromMemfd(const std::string& object, void** handle, int* fd, std::string* error) {
    const int m = ::memfd_create("kiln-kernel", MFD_CLOEXEC);
    if (m < 0) return false;
    if (!writeAll(m, object) || ::access("/proc/self/fd", F_OK) != 0) {
      ::close(m);
      return false;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(m);
    *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!*handle) {
      const char* why = dlerror();
      *error = std::string("dlopen: ") + (why ? why : "unknown error");
      ::close(m);
      return true;
    }
    *fd = m;
    return true;
  }

  void* openFromTemporaryFile(const std::string& object, std::string* error) {
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-kernel-" + std::to_string(::getpid()) +
                       "-" + std::to_string(next_++) + "-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
      *error = "cannot create a temporary file for a kernel in " + path + ": " + std::strerror(errno);
      return nullptr;
    }
    const bool written = writeAll(fd, object);
    ::close(fd);
    void* handle = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!handle) *error = written ? std::string("dlopen: ") + dlerror() : "cannot write " + path;
    ::unlink(path.c_str());  // the mapping outlives the name, which stays unique
    return handle;
  }

  std::atomic<uint64_t> next_{0};
};

std::atomic<bool> gLoaderWanted{false};

}  // namespace

KernelLoader* loadKernelLoader() {
  static auto* loader = new SharedObjectLoader();  // leaked: kernels may run until exit
  gLoaderWanted = true;
  return loader;
}

bool kernelLoaderLoaded() { return gLoaderWanted.load(); }

}  // namespace kiln::exec
