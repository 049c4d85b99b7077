// Reading Prometheus's text exposition format in tests.
#ifndef DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_
#define DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_

#include <cstdlib>
#include <map>
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

// One sample line: its name, labels and value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the text exposition format (only what prometheus-cpp writes: no
// escapes in our label values, no timestamps).
inline std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    Sample s;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (brace != absl::string_view::npos && brace < space) {
      s.name = std::string(line.substr(0, brace));
      const size_t close = line.rfind('}');
      for (absl::string_view kv :
           absl::StrSplit(line.substr(brace + 1, close - brace - 1), ',', absl::SkipEmpty())) {
        const size_t eq = kv.find('=');
        s.labels[std::string(kv.substr(0, eq))] =
            std::string(kv.substr(eq + 2, kv.size() - eq - 3));  // strip the quotes
      }
    } else {
      s.name = std::string(line.substr(0, space));
    }
    s.value = std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
    samples.push_back(std::move(s));
  }
  return samples;
}

// The samples called `name` whose labels include `labels`.
inline std::vector<Sample> MatchingSamples(const std::string& text, const std::string& name,
                                           const std::map<std::string, std::string>& labels = {}) {
  std::vector<Sample> out;
  for (Sample& s : ParseSamples(text)) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (all) out.push_back(std::move(s));
  }
  return out;
}

// The sum of every sample called `name` whose labels include `labels`.
inline double SumOfSamples(const std::string& text, const std::string& name,
                           const std::map<std::string, std::string>& labels = {}) {
  double sum = 0;
  for (const Sample& s : MatchingSamples(text, name, labels)) sum += s.value;
  return sum;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_PROMETHEUS_TEXT_H_
