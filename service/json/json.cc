#include "service/json/json.h"

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

// The streaming pass of the bounded parse: counts depth and values and
// stops at the first bound crossed or the first syntax error.
class BoundsCheck final : public nlohmann::json_sax<Json> {
 public:
  explicit BoundsCheck(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool key(string_t&) override { return true; }
  bool start_object(std::size_t) override { return Open(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = absl::InvalidArgumentError(absl::StrCat("JSON: ", e.what()));
    return false;
  }

  // Valid only after the pass stopped early.
  const absl::Status& error() const { return error_; }

 private:
  bool Value() {
    if (++values_ <= limits_.max_values) return true;
    error_ = absl::InvalidArgumentError(
        absl::StrCat("JSON: more than ", limits_.max_values, " values (the server's limit)"));
    return false;
  }
  bool Open() {
    if (!Value()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    error_ = absl::InvalidArgumentError(absl::StrCat(
        "JSON: arrays and objects nested deeper than ", limits_.max_depth, " (the server's limit)"));
    return false;
  }
  bool Close() {
    --depth_;
    return true;
  }

  const JsonLimits limits_;
  int depth_ = 0;
  size_t values_ = 0;
  absl::Status error_ = absl::InternalError("JSON: the bounds check stopped without a reason");
};

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text, const JsonLimits& limits) {
  BoundsCheck check(limits);
  if (!Json::sax_parse(text.begin(), text.end(), &check)) return check.error();
  return ParseJson(text);
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
