#include "service/json/json.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/base/utf8.h"

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

// The SAX side of ParseJson(text, limits): counts as it reads and stops at
// the first bound crossed (or the first syntax error), holding no values.
class BoundsCheck final : public nlohmann::json_sax<Json> {
 public:
  explicit BoundsCheck(const JsonLimits& limits) : limits_(limits) {}
  std::string error;  // empty while the document is within bounds

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  // An object's members are kept in insertion order and looked up by a
  // linear scan as they are inserted: bounding them keeps the tree's
  // build linear in the body too.
  bool key(string_t&) override {
    if (++members_.back() > limits_.max_object_members) {
      return Fail(absl::StrCat("JSON: an object with more than ", limits_.max_object_members,
                               " members (the server's limit)"));
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return Fail(absl::StrCat("JSON: ", e.what()));
  }

 private:
  bool Value() {
    if (++values_ > limits_.max_values) {
      return Fail(
          absl::StrCat("JSON: more than ", limits_.max_values, " values (the server's limit)"));
    }
    return true;
  }
  bool Open() {
    if (static_cast<int>(members_.size()) >= limits_.max_depth) {
      return Fail(absl::StrCat("JSON: arrays and objects nested deeper than ", limits_.max_depth,
                               " (the server's limit)"));
    }
    members_.push_back(0);
    return Value();  // a container counts as a value
  }
  bool Close() {
    members_.pop_back();
    return true;
  }
  bool Fail(std::string what) {
    error = std::move(what);
    return false;
  }

  const JsonLimits& limits_;
  size_t values_ = 0;
  std::vector<size_t> members_;  // of each open container (arrays count none)
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
    if (after < text.size() && text[after] == ':')
      key = std::string(text.substr(begin, end - begin));
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
  // Two linear passes: the bounds are checked by a SAX pass that builds
  // nothing, then the tree is built without a callback. (nlohmann's
  // callback parser rescans the parent container at every object's end,
  // which made `[{},{},...]` quadratic: issue #34 R1.)
  BoundsCheck check(limits);
  try {
    Json::sax_parse(text.begin(), text.end(), &check);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", e.what()));
  }
  if (!check.error.empty()) return absl::InvalidArgumentError(check.error);
  return ParseJson(text);
}

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Json> json = ParseJson(text.str());
  if (!json.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", json.status().message()));
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
