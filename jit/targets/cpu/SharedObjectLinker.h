//===- SharedObjectLinker.h - Kernel objects to shared objects --*- C++ -*-===//
//
// A compiled kernel is stored and loaded as an ELF shared object, so that a
// process replaying cached kernels maps it with dlopen and never needs LLVM.
// The relocatable objects codegen emits are linked here with the system's
// ld (or, where that is missing or fails, the C compiler driver: cc, else gcc
// or clang). A kernel needs the libkiln this process runs (its kiln_rt_*
// entry points and memrefCopy) and libm: ld links it against a stub with
// libkiln's SONAME, and dlopen resolves its symbols in the loaded libkiln
// and libkiln's dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_SHAREDOBJECTLINKER_H
#define KILN_JIT_TARGETS_CPU_SHAREDOBJECTLINKER_H

#include <chrono>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace kiln::jit::cpu {

/// The bytes of a shared object made of `objects` (position independent, as
/// hostTargetMachineBuilder() emits them; the shares of one kernel). Every
/// symbol must resolve among them and against libkiln, libm and libc: an
/// undefined one is an error here, not at dlopen.
llvm::Expected<std::string> linkSharedObject(llvm::ArrayRef<llvm::StringRef> objects);

/// Finds the linker and the loaded libraries the links use, once per
/// process. The compiler calls it before its first compilation, so that the
/// compile threads only read what it found (a function-local static that one
/// of them initialised looks unordered to ThreadSanitizer, which does not see
/// the guard's synchronisation in this uninstrumented library).
void prepareSharedObjectLinker();

/// How old a dead process's link file must be before it is removed: a link
/// takes milliseconds, and the age also spares the files of a process in
/// another PID namespace sharing the directory.
inline constexpr std::chrono::seconds kStaleLinkFileAge{600};

/// Removes the link's temporary files in `dir` (named "kiln-kernel-<pid>-..."
/// and "kiln-soname-<pid>-...") that a process no longer running left behind
/// (killed during a link, or before its exit handlers removed its SONAME
/// stub), when they are regular files of this user older than `minAge`.
/// prepareSharedObjectLinker runs it once on the system's temporary
/// directory. Returns how many it removed.
int removeStaleLinkFiles(const std::string &dir, std::chrono::seconds minAge);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_SHAREDOBJECTLINKER_H
