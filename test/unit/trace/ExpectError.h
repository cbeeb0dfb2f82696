// expectError: the call throws kiln::Error, and its message names what it must.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "kiln/error.h"

namespace kiln {

/// Expects `call` to throw kiln::Error whose message contains every needle.
template <class F>
void expectError(F&& call, std::initializer_list<const char*> needles) {
  try {
    call();
    ADD_FAILURE() << "no kiln::Error thrown";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' missing in: " << msg;
  }
}

}  // namespace kiln
