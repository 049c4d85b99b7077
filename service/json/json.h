// JSON for the CLI's `--json` output, result files, the golden files the
// tests read and the OpenAI-compatible HTTP API: nlohmann::json (Debian's nlohmann-json3-dev), with
// object keys kept in insertion order so result files read in the order written. The functions
// below are the exception-free edges: parse errors become a Status, and bytes that are not UTF-8
// are replaced on output.
#ifndef DLLM_SERVICE_JSON_JSON_H_
#define DLLM_SERVICE_JSON_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/base/status_macros.h"

// A const operator[] on a missing key is undefined behaviour in
// nlohmann::json (its assertion is compiled out under NDEBUG); keep it a
// loud abort in every build.
#ifndef JSON_ASSERT
#define JSON_ASSERT(cond) DLLM_CHECK(cond)
#endif
#include <nlohmann/json.hpp>

namespace dllm {

using Json = nlohmann::ordered_json;

// Parses `text`; errors say where (line and column) and what.
absl::StatusOr<Json> ParseJson(absl::string_view text);

// Bounds on a document from an untrusted client, checked before any of it
// is built, so the tree never grows past them: a 4 MiB body of "[" built
// whole costs ~330 MB (issue #25 N1); within these bounds a body's tree
// stays within a few times its size, and parsing is linear in its bytes.
struct JsonLimits {
  int max_depth = 32;                // nested arrays and objects
  size_t max_values = 1 << 17;       // scalars, arrays and objects together
  size_t max_object_members = 1024;  // in any one object
};

// As above, refusing (INVALID_ARGUMENT, saying which bound and where) a
// document deeper or larger than `limits`, and one that is not UTF-8
// ("input_suffix: invalid UTF-8 at byte 40 of the body", naming the member
// whose value holds the byte).
absl::StatusOr<Json> ParseJson(absl::string_view text, const JsonLimits& limits);

// The name of the last object member whose key ends before byte `offset`
// of the JSON `text` (the member a byte inside a value belongs to); empty
// when there is none.
std::string KeyBefore(absl::string_view text, size_t offset);

// Reads and parses a JSON file; errors name the file.
absl::StatusOr<Json> ReadJsonFile(const std::string& path);

// Compact when `indent` < 0, pretty-printed otherwise. Bytes that are not
// valid UTF-8 (a token piece that splits a character) become U+FFFD.
std::string DumpJson(const Json& value, int indent = -1);

// The member `key` of an object, or nullptr when `value` is not an object
// or has no such member.
const Json* FindMember(const Json& value, absl::string_view key);

}  // namespace dllm

#endif  // DLLM_SERVICE_JSON_JSON_H_
