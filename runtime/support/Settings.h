// The one parser of Kiln's settings: the KILN_* environment variables read at
// start-up, kiln::set_settings and the C ABI's kiln_set_option share one
// table of names, documented ranges and value spellings (README,
// "Environment variables").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::exec {

/// Where a value comes from decides what a bad one does.
enum class SettingSource {
  /// The environment: a bad value is replaced (an integer out of range is
  /// clamped, anything else takes the default) and one warning names the
  /// variable, the value given and the value used instead.
  Environment,
  /// kiln_set_option / set_settings: a bad value is rejected with a message
  /// naming the option, the value and the accepted range.
  Option,
};

struct SettingInfo;

/// The setting called `name`: its KILN_* variable or its short name
/// ("jit_threshold"), exactly. Null when there is none.
const SettingInfo* findSetting(std::string_view name);
/// Can kiln_set_option change it while the process runs?
bool isRuntimeOption(const SettingInfo& setting);
/// The short names of the runtime options, "log, max_trace_ops, ...".
std::string runtimeOptionNames();

/// Parses `text` for `setting` into `s`. Enumerated values are
/// case-insensitive and stored in lower case. Returns "" when `text` was
/// used as given; otherwise, from the environment, the warning (and `s` holds
/// the value used instead), and as an option the error (and `s` is
/// unchanged).
std::string applySetting(const SettingInfo& setting, std::string_view text, SettingSource source, Settings& s);
/// The current value of `setting` in `s` as text (as kiln_get_option gives it).
std::string settingText(const SettingInfo& setting, const Settings& s);

/// Settings from the environment as seen through `lookup` (std::getenv in
/// the process; tests pass their own). Each variable whose value was not used
/// as given adds one warning to `warnings`.
using EnvironmentLookup = const char* (*)(const char* name);
Settings readSettings(EnvironmentLookup lookup, std::vector<std::string>* warnings);

/// `s` with its enumerated values in lower case; throws kiln::Error naming
/// the first field outside its range (set_settings checks every new
/// snapshot with it).
Settings checkedSettings(const Settings& s);

/// KILN_DUMP_IR, read at each call (tests change it between compiles): the
/// directory to dump IR into, or "" when it is unset or cannot be used. A
/// missing directory is created; a value that names a file or a directory
/// that cannot be created or written is warned about once and not used.
std::string irDumpDirectory();
/// The check behind irDumpDirectory for one path: the usable directory
/// (created if missing), or "" with the reason in *warning.
std::string checkIrDumpDirectory(const std::string& path, std::string* warning);

}  // namespace kiln::exec
