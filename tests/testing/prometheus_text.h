// Reading Prometheus's text exposition format in tests.
#ifndef DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_
#define DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace dllm::testing {

// The metric families a scrape declares (its "# TYPE name kind" lines).
inline std::set<std::string> FamilyNames(const std::string& text) {
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 4 && parts[0] == "#" && parts[1] == "TYPE") names.insert(parts[2]);
  }
  return names;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_
