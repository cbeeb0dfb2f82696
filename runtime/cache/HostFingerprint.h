// HostFingerprint: what native code this process can run, worked out without
// LLVM (from CPUID and build-time facts), so that a process replaying cached
// kernels never loads LLVM. The compiler records the same text in every
// kernel it builds; the disk cache keys entries on it.
#pragma once

#include <string>

namespace kiln::exec {

/// "name=value" lines: kiln (version), llvm (the compiler's LLVM version),
/// triple, cpu (vendor family-model-stepping), features (sorted "+name"
/// list of the ISA extensions code generation may use), cpuid (the raw
/// feature words, so that two CPUs LLVM could tell apart never share a
/// kernel) and pipeline (digest of the compiler's sources). Computed once.
/// Not the cache sizes, though the compiler reads the last-level cache's
/// (streaming stores): a kernel compiled for another size runs correctly
/// here, so a cache directory still serves machines of one CPU model whose
/// slices report different caches.
const std::string& hostFingerprint();

}  // namespace kiln::exec
