#include "service/json/json.h"

#include "absl/strings/ascii.h"
#include "engine/base/utf8.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dllm {

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e99999).
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", e.what()));
  }
}

namespace {

// Thrown from the parser's callback at the first bound crossed; the tree
// built so far is within the bounds, so what it cost is bounded too.
struct BoundCrossed {
  std::string what;
};

}  // namespace

std::string KeyBefore(absl::string_view text, size_t offset) {
  std::string key;
  size_t i = 0;
  while (i < offset && i < text.size()) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    const size_t begin = ++i;
    while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
    if (i >= offset) break;  // the string holding `offset`
    const size_t end = i++;
    size_t after = i;
    while (after < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[after]))) {
      ++after;
    }
    if (after < text.size() && text[after] == ':') key = std::string(text.substr(begin, end - begin));
  }
  return key;
}

absl::StatusOr<Json> ParseJson(absl::string_view text, const JsonLimits& limits) {
  // JSON is UTF-8 (RFC 8259): name the member a bad byte is in, which the
  // parser's own message does not.
  if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
    const std::string key = KeyBefore(text, static_cast<size_t>(bad));
    return absl::InvalidArgumentError(absl::StrCat(
        key.empty() ? "" : absl::StrCat(key.size() > 64 ? key.substr(0, 64) : key, ": "),
        "invalid UTF-8 at byte ", bad, " of the body"));
  }
  int depth = 0;
  size_t values = 0;
  // One pass: the callback sees each value as it is read, before anything
  // deeper or later is built.
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json&) {
    using Event = Json::parse_event_t;
    switch (event) {
      case Event::key:
        return true;
      case Event::object_end:
      case Event::array_end:
        --depth;
        return true;
      case Event::object_start:
      case Event::array_start:
        if (++depth > limits.max_depth) {
          throw BoundCrossed{absl::StrCat("JSON: arrays and objects nested deeper than ",
                                          limits.max_depth, " (the server's limit)")};
        }
        [[fallthrough]];
      case Event::value:  // a scalar (containers are counted at their start)
        if (++values > limits.max_values) {
          throw BoundCrossed{absl::StrCat("JSON: more than ", limits.max_values,
                                          " values (the server's limit)")};
        }
        return true;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const BoundCrossed& b) {
    return absl::InvalidArgumentError(b.what);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", e.what()));
  }
}

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Json> json = ParseJson(text.str());
  if (!json.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", json.status().message()));
  return json;
}

std::string DumpJson(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

const Json* FindMember(const Json& value, absl::string_view key) {
  if (!value.is_object()) return nullptr;
  auto it = value.find(key);
  return it == value.end() ? nullptr : &*it;
}

}  // namespace dllm
