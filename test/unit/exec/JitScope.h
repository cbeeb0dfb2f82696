// JitScope: sets the JIT mode and threshold for one scope (disk cache off, so
// tests that count compilations see every one), restoring the settings after.
#pragma once

#include "kiln/runtime.h"
#include "runtime/exec/Engine.h"

namespace kiln {

class JitScope {
 public:
  explicit JitScope(JitMode mode, int64_t threshold = 2) : saved_(settings()) {
    Settings s = saved_;
    s.jit = mode;
    s.cache = "off";
    s.jit_threshold = threshold;
    set_settings(s);
  }
  ~JitScope() {
    exec::Engine::instance().drainCompiles();
    set_settings(saved_);
  }
  JitScope(const JitScope&) = delete;
  JitScope& operator=(const JitScope&) = delete;

 private:
  Settings saved_;
};

}  // namespace kiln
