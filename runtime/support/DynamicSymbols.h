// Resolving a table of entry points from a library opened with dlopen (the
// CUDA driver, cuBLASLt, the Level Zero loader): each slot filled by name,
// the first missing name kept so the caller can say what the library lacks.
#pragma once

#include <dlfcn.h>

#include <string>

namespace kiln::support {

/// Resolves `symbol` into `slot` (null when absent); records the first
/// missing one in `missing`.
template <class F>
void resolveSymbol(void* handle, F& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!slot && missing.empty()) missing = symbol;
}

}  // namespace kiln::support
