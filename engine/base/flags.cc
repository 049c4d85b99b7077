#include "engine/base/flags.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/utf8.h"

namespace dllm {

int PrintHelp(const char* usage) {
  std::fputs(usage, stdout);
  return 0;
}

int FailCommand(const char* command, const absl::Status& status) {
  std::fprintf(stderr, "dllm %s: %s\n", command, PrintableText(status.message()).c_str());
  return 2;
}

std::string ParsedFlags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> ParsedFlags::GetInt(const std::string& name, int64_t fallback) const {
  int64_t v = fallback;
  if (absl::Status s = GetNumber(name, &v); !s.ok()) return s;
  return v;
}

absl::StatusOr<double> ParsedFlags::GetDouble(const std::string& name, double fallback) const {
  double v = fallback;
  if (absl::Status s = GetNumber(name, &v); !s.ok()) return s;
  return v;
}

absl::StatusOr<int64_t> ParsedFlags::GetIntInRange(const std::string& name, int64_t fallback,
                                                   int64_t min, int64_t max) const {
  absl::StatusOr<int64_t> v = GetInt(name, fallback);
  if (!v.ok()) {
    // Say the flag's own range, not int64's.
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": '", Get(name), "' is not a whole number in [", min, ", ", max, "]"));
  }
  if (*v < min || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " ", *v, " is outside [", min, ", ", max, "]"));
  }
  return *v;
}

absl::Status ParsedFlags::CheckOnly(const std::set<std::string>& allowed) const {
  for (const auto& [name, value] : values) {
    if (!allowed.count(name))
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  }
  return absl::OkStatus();
}

std::string ParsedFlags::TakeFirstPositional() {
  if (positional.empty()) return "";
  std::string first = positional.front();
  positional.erase(positional.begin());
  return first;
}

absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags) {
  ParsedFlags out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      out.positional.insert(out.positional.end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (inline_value)
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.values[name] = "";
    } else if (value_flags.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc)
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = argv[++i];
      }
      out.values[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &v)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", item, "' is not an integer"));
    }
    ids.push_back(v);
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  return ids;
}

}  // namespace dllm
