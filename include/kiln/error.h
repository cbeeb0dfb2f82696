// kiln::Error: the one exception type of the public C++ API.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

/// Thrown at the call that caused a problem. The message names the op, the
/// shapes/dtypes involved and how to fix it. Nothing recorded or computed
/// before the failing call is lost.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kiln
