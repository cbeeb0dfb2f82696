// The runtime's spdlog logger ("kiln"), quiet unless KILN_LOG says otherwise.
#pragma once

#include <spdlog/spdlog.h>

namespace kiln::exec {

spdlog::logger& log();

}  // namespace kiln::exec
