// A small JSON value with a parser and a writer, for the CLI's `--json`
// output, result files and reading golden data in tests. Not for hot paths.
#ifndef DLLM_ENGINE_BASE_JSON_H_
#define DLLM_ENGINE_BASE_JSON_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace dllm {

class Json {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;  // keeps insertion order

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : kind_(Kind::kBool), bool_(b) {}
  Json(int v) : kind_(Kind::kNumber), num_(v), is_int_(true), int_(v) {}
  Json(int64_t v) : kind_(Kind::kNumber), num_(static_cast<double>(v)), is_int_(true), int_(v) {}
  Json(uint64_t v) : Json(static_cast<int64_t>(v)) {}
  Json(double v) : kind_(Kind::kNumber), num_(v) {}
  Json(const char* s) : kind_(Kind::kString), str_(s) {}
  Json(std::string s) : kind_(Kind::kString), str_(std::move(s)) {}
  Json(absl::string_view s) : kind_(Kind::kString), str_(s) {}
  Json(Array a) : kind_(Kind::kArray), arr_(std::make_shared<Array>(std::move(a))) {}

  static Json MakeObject() {
    Json j;
    j.kind_ = Kind::kObject;
    j.obj_ = std::make_shared<Object>();
    return j;
  }
  static Json MakeArray() { return Json(Array{}); }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool as_bool() const { return bool_; }
  double as_double() const { return num_; }
  int64_t as_int() const { return is_int_ ? int_ : static_cast<int64_t>(num_); }
  const std::string& as_string() const { return str_; }
  const Array& as_array() const { return *arr_; }
  const Object& as_object() const { return *obj_; }

  // Object access; `Get` returns nullptr when absent or not an object.
  const Json* Get(absl::string_view key) const;
  const Json& operator[](absl::string_view key) const;  // null Json when absent
  const Json& operator[](size_t index) const { return (*arr_)[index]; }
  size_t size() const;

  // Builders. Copies share array and object storage: finish building a value
  // before copying it.
  Json& Set(std::string key, Json value);  // object
  Json& Push(Json value);                  // array

  // Compact when `indent` < 0, pretty-printed otherwise.
  std::string Dump(int indent = -1) const;

  static absl::StatusOr<Json> Parse(absl::string_view text);

 private:
  void DumpTo(std::string* out, int indent, int depth) const;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double num_ = 0;
  bool is_int_ = false;
  int64_t int_ = 0;
  std::string str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
};

// Reads and parses a JSON file.
absl::StatusOr<Json> ReadJsonFile(const std::string& path);

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_JSON_H_
