// Minimal flag parsing for the `dllm` subcommands: `--name value`,
// `--name=value` and boolean `--name`, plus positional arguments. Every
// command declares its flags, so a typo is an error, not a silent default.
#ifndef DLLM_SERVICE_CLI_FLAGS_H_
#define DLLM_SERVICE_CLI_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dllm {

struct ParsedFlags {
  std::map<std::string, std::string> values;  // name (no dashes) -> value ("" for booleans)
  std::vector<std::string> positional;
  bool help = false;  // --help or -h was given (every command accepts it)

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
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

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_FLAGS_H_
