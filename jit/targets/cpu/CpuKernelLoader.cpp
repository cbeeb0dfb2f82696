//===- CpuKernelLoader.cpp - Links compiled kernels into the process -----===//
//
// libkiln_loader: LLVM's ORC only (no MLIR, no compiler). One LLJIT per
// process; each kernel gets its own JITDylib, so two objects may define the
// same entry symbol (a kernel loaded from disk and recompiled after, or two
// keys with one hash).
//
//===----------------------------------------------------------------------===//

#include <atomic>
#include <mutex>

#include "jit/targets/cpu/HostTarget.h"
#include "runtime/exec/Executable.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

extern "C" void memrefCopy(int64_t elemSize, void *src, void *dst);
extern "C" void kiln_rt_parallel_for(void (*body)(void *, int64_t, int64_t), void *ctx, int64_t n, int64_t grain);
extern "C" void kiln_rt_matmul_f32(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   int64_t);

namespace kiln::jit::cpu {

namespace {

class LoadedKernel final : public exec::Executable {
public:
  LoadedKernel(void (*entry)(void **), std::size_t scratch, int kernels)
      : entry_(entry), scratch_(scratch), kernels_(kernels) {}
  void launch(void **args) const override { entry_(args); }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return kernels_; }

private:
  void (*entry_)(void **);
  std::size_t scratch_;
  int kernels_;
};

class CpuKernelLoader final : public exec::KernelLoader {
public:
  /// Creates the LLJIT; false and `error` when the host is unsupported.
  bool init(std::string &error) {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = hostTargetMachineBuilder();
    if (!jtmb) {
      error = llvm::toString(jtmb.takeError());
      return false;
    }
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
      error = llvm::toString(tm.takeError());
      return false;
    }
    fingerprint_ = hostFingerprint(**tm);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) {
      error = llvm::toString(jit.takeError());
      return false;
    }
    jit_ = std::move(*jit);
    // The runtime's entry points by address (libkiln may be loaded locally),
    // the rest (libm) from the process.
    auto &jd = jit_->getMainJITDylib();
    auto &es = jit_->getExecutionSession();
    llvm::orc::SymbolMap runtime;
    auto add = [&](const char *name, void *address) {
      runtime[es.intern(jit_->mangle(name))] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                                llvm::JITSymbolFlags::Exported};
    };
    add("kiln_rt_parallel_for", reinterpret_cast<void *>(&kiln_rt_parallel_for));
    add("kiln_rt_matmul_f32", reinterpret_cast<void *>(&kiln_rt_matmul_f32));
    add("memrefCopy", reinterpret_cast<void *>(&memrefCopy));
    if (auto err = jd.define(llvm::orc::absoluteSymbols(std::move(runtime)))) {
      error = llvm::toString(std::move(err));
      return false;
    }
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit_->getDataLayout().getGlobalPrefix());
    if (!gen) {
      error = llvm::toString(gen.takeError());
      return false;
    }
    jd.addGenerator(std::move(*gen));
    return true;
  }

  const std::string &fingerprint() const override { return fingerprint_; }

  std::shared_ptr<exec::Executable> load(const std::string &object, const std::string &entry,
                                         std::size_t scratchBytes, int kernelCount, std::string *error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto jd = jit_->createJITDylib("kiln_kernel_" + std::to_string(next_++));
    if (!jd) {
      *error = llvm::toString(jd.takeError());
      return nullptr;
    }
    jd->addToLinkOrder(jit_->getMainJITDylib());
    auto fail = [&](llvm::Error err) -> std::shared_ptr<exec::Executable> {
      *error = "ORC: " + llvm::toString(std::move(err));
      if (auto removeErr = jit_->getExecutionSession().removeJITDylib(*jd))
        llvm::consumeError(std::move(removeErr));
      return nullptr;
    };
    if (auto err = jit_->addObjectFile(*jd, llvm::MemoryBuffer::getMemBufferCopy(object, entry)))
      return fail(std::move(err));
    auto sym = jit_->lookup(*jd, entry);
    if (!sym)
      return fail(sym.takeError());
    return std::make_shared<LoadedKernel>(sym->toPtr<void (*)(void **)>(), scratchBytes, std::max(kernelCount, 1));
  }

private:
  std::mutex mutex_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string fingerprint_;
  int next_ = 0;
};

} // namespace

} // namespace kiln::jit::cpu

/// The factory libkiln looks up after loading this library.
extern "C" __attribute__((visibility("default"))) kiln::exec::KernelLoader *kiln_loader_create(std::string *error) {
  static auto *loader = [error] {
    auto *l = new kiln::jit::cpu::CpuKernelLoader(); // leaked: kernels run until exit
    if (!l->init(*error)) {
      delete l;
      return static_cast<kiln::jit::cpu::CpuKernelLoader *>(nullptr);
    }
    return l;
  }();
  return loader;
}
