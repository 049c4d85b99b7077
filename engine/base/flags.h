// Flag parsing for every binary (dllm, dllm-server, dllm-client): `--name
// value`, `--name=value` and boolean `--name`, plus positional arguments;
// `--` ends the flags. Each binary declares its flags, so a typo is an
// error, not a silent default.
#ifndef DLLM_ENGINE_BASE_FLAGS_H_
#define DLLM_ENGINE_BASE_FLAGS_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dllm {

struct ParsedFlags {
  std::map<std::string, std::string> values;  // name (no dashes) -> value ("" for booleans)
  std::vector<std::string> positional;
  bool help = false;  // --help or -h was given (every command accepts it)

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // GetInt, refused outside [min, max] with both bounds in the message.
  absl::StatusOr<int64_t> GetIntInRange(const std::string& name, int64_t fallback, int64_t min,
                                        int64_t max) const;

  // Sets *out from the flag when it is given and valid (else leaves it): a
  // whole number in T's range, or a finite number for floating-point T.
  template <typename T>
  absl::Status GetNumber(const std::string& name, T* out) const;

  // Fails on any given flag not in `allowed`: the flags a binary parses
  // with are the union over its commands, and each command checks its own.
  absl::Status CheckOnly(const std::set<std::string>& allowed) const;

  // Removes and returns the first positional argument ("" when none): the
  // command, wherever it stood among the flags.
  std::string TakeFirstPositional();
};

// `value_flags` take a value; `bool_flags` do not.
absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags);

// Prints `usage` on stdout and returns 0: the answer to --help.
int PrintHelp(const char* usage);

// Prints "dllm COMMAND: message" on stderr and returns 2, the exit code of
// every command's usage and input errors.
int FailCommand(const char* command, const absl::Status& status);

// Parses "1,2,3" into integers; errors name `what` and the bad item.
absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& what);

template <typename T>
absl::Status ParsedFlags::GetNumber(const std::string& name, T* out) const {
  if (!Has(name)) return absl::OkStatus();
  const std::string value = Get(name);
  if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    if (!absl::SimpleAtod(value, &d) || !std::isfinite(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", value, "' is not a finite number"));
    }
    *out = static_cast<T>(d);
  } else {
    T v{};  // SimpleAtoi writes even when it fails; *out changes only on success
    if (!absl::SimpleAtoi(value, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", value, "' is not a whole number in [",
                       std::numeric_limits<T>::min(), ", ", std::numeric_limits<T>::max(), "]"));
    }
    *out = v;
  }
  return absl::OkStatus();
}

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_FLAGS_H_
