#include "absl/strings/string_view.h"
#include "engine/base/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/utf8.h"

namespace dllm {
namespace {

const Json kNullJson;

class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  absl::StatusOr<Json> ParseDocument() {
    Json v;
    if (!ParseValue(&v, 0)) return Error();
    SkipSpace();
    if (pos_ != s_.size()) {
      err_ = "trailing characters";
      return Error();
    }
    return v;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("json: offset ", pos_, ": ", err_));
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Fail(const char* why) {
    err_ = why;
    return false;
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return Fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool ParseValue(Json* out, int depth) {
    if (depth > 256) return Fail("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return ParseObject(out, depth);
    if (c == '[') return ParseArray(out, depth);
    if (c == '"') {
      std::string str;
      if (!ParseString(&str)) return false;
      *out = Json(std::move(str));
      return true;
    }
    if (c == 't') return Literal("true") && (*out = Json(true), true);
    if (c == 'f') return Literal("false") && (*out = Json(false), true);
    if (c == 'n') return Literal("null") && (*out = Json(), true);
    if (c == 'N') return Literal("NaN") && (*out = Json(std::nan("")), true);
    if (c == 'I') return Literal("Infinity") && (*out = Json(HUGE_VAL), true);
    return ParseNumber(out);
  }

  bool ParseNumber(Json* out) {
    const size_t start = pos_;
    if (s_.substr(pos_, 9) == "-Infinity") {
      pos_ += 9;
      *out = Json(-HUGE_VAL);
      return true;
    }
    bool is_int = true;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_int = false;
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == start) return Fail("invalid value");
    const std::string text(s_.substr(start, pos_ - start));
    char* end = nullptr;
    if (is_int) {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end == text.c_str() + text.size()) {
        *out = Json(static_cast<int64_t>(v));
        return true;
      }
    }
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return Fail("invalid number");
    *out = Json(d);
    return true;
  }

  bool ParseHex4(uint32_t* cp) {
    if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
    *cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[pos_++];
      *cp <<= 4;
      if (c >= '0' && c <= '9') *cp |= c - '0';
      else if (c >= 'a' && c <= 'f') *cp |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') *cp |= c - 'A' + 10;
      else return Fail("bad \\u escape");
    }
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!ParseHex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t lo = 0;
            if (!ParseHex4(&lo)) return false;
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              AppendUtf8(0xFFFD, out);
              cp = lo;
            }
          } else if (cp >= 0xD800 && cp < 0xE000) {
            cp = 0xFFFD;  // lone surrogate
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
    return Fail("unterminated string");
  }

  bool ParseArray(Json* out, int depth) {
    ++pos_;
    *out = Json::MakeArray();
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      Json item;
      if (!ParseValue(&item, depth + 1)) return false;
      out->Push(std::move(item));
      SkipSpace();
      if (pos_ >= s_.size()) return Fail("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool ParseObject(Json* out, int depth) {
    ++pos_;
    *out = Json::MakeObject();
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a key");
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      Json value;
      if (!ParseValue(&value, depth + 1)) return false;
      out->Set(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ >= s_.size()) return Fail("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  absl::string_view s_;
  size_t pos_ = 0;
  const char* err_ = "";
};

void DumpString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

const Json* Json::Get(absl::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (const auto& [k, v] : *obj_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Json& Json::operator[](absl::string_view key) const {
  const Json* v = Get(key);
  return v ? *v : kNullJson;
}

size_t Json::size() const {
  if (kind_ == Kind::kArray) return arr_->size();
  if (kind_ == Kind::kObject) return obj_->size();
  return 0;
}

Json& Json::Set(std::string key, Json value) {
  for (auto& [k, v] : *obj_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  obj_->emplace_back(std::move(key), std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  arr_->push_back(std::move(value));
  return *this;
}

std::string Json::Dump(int indent) const {
  std::string out;
  DumpTo(&out, indent, 0);
  return out;
}

void Json::DumpTo(std::string* out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (kind_) {
    case Kind::kNull: *out += "null"; return;
    case Kind::kBool: *out += bool_ ? "true" : "false"; return;
    case Kind::kNumber: {
      if (is_int_) {
        *out += std::to_string(int_);
      } else if (!std::isfinite(num_)) {
        *out += "null";
      } else {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.17g", num_);
        // Shortest form that round-trips.
        for (int prec = 6; prec <= 17; ++prec) {
          char tmp[32];
          std::snprintf(tmp, sizeof(tmp), "%.*g", prec, num_);
          if (std::strtod(tmp, nullptr) == num_) {
            std::snprintf(buf, sizeof(buf), "%s", tmp);
            break;
          }
        }
        *out += buf;
      }
      return;
    }
    case Kind::kString: DumpString(str_, out); return;
    case Kind::kArray: {
      out->push_back('[');
      for (size_t k = 0; k < arr_->size(); ++k) {
        if (k) out->push_back(',');
        newline(depth + 1);
        (*arr_)[k].DumpTo(out, indent, depth + 1);
      }
      if (!arr_->empty()) newline(depth);
      out->push_back(']');
      return;
    }
    case Kind::kObject: {
      out->push_back('{');
      for (size_t k = 0; k < obj_->size(); ++k) {
        if (k) out->push_back(',');
        newline(depth + 1);
        DumpString((*obj_)[k].first, out);
        *out += indent < 0 ? ":" : ": ";
        (*obj_)[k].second.DumpTo(out, indent, depth + 1);
      }
      if (!obj_->empty()) newline(depth);
      out->push_back('}');
      return;
    }
  }
}

absl::StatusOr<Json> Json::Parse(absl::string_view text) { return Parser(text).ParseDocument(); }

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Json> j = Json::Parse(ss.str());
  if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", j.status().message()));
  return j;
}

}  // namespace dllm
