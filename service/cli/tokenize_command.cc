#include "service/cli/tokenize_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/flags.h"
#include "engine/base/utf8.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"
#include "service/json/json.h"

namespace dllm {
namespace {

constexpr char kTokenizeUsage[] =
    "usage: dllm tokenize --model M.gguf [--no-special] [--json] [--file F.json] TEXT...\n"
    "  the ids and pieces of each TEXT (or of each string in the JSON array F.json), as\n"
    "  generate and the gRPC Tokenize RPC tokenize a prompt: BOS per the model's\n"
    "  add_bos_token, special-token texts parsed (llama-diffusion-cli's way);\n"
    "  --no-special: neither (llama-tokenize --no-bos without --parse-special)\n";

int Fail(const absl::Status& s) { return FailCommand("tokenize", s); }

absl::StatusOr<std::vector<std::string>> TextsFromFile(const std::string& path) {
  absl::StatusOr<Json> j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  if (!j->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON array of strings"));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < j->size(); ++i) {
    if (!(*j)[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": element ", i, " is not a string"));
    }
    texts.push_back((*j)[i].get<std::string>());
  }
  return texts;
}

// "Hello" -> 'Hello'; a piece that is not valid UTF-8 on its own (part of a
// character) shows as its bytes.
std::string ShownPiece(const std::string& piece) {
  std::string shown = PrintableText(piece);
  return absl::StrCat("'", shown, "'");
}

}  // namespace

int RunTokenize(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, {"model", "file"}, {"no-special", "json"});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kTokenizeUsage);
  if (!flags->Has("model") || (flags->positional.empty() == !flags->Has("file"))) {
    std::fputs(kTokenizeUsage, stderr);
    return 2;
  }
  std::vector<std::string> texts = flags->positional;
  if (flags->Has("file")) {
    absl::StatusOr<std::vector<std::string>> from_file = TextsFromFile(flags->Get("file"));
    if (!from_file.ok()) return Fail(from_file.status());
    texts = *from_file;
  }
  absl::StatusOr<GgufFile> file = GgufFile::Open(flags->Get("model"));
  if (!file.ok()) return Fail(file.status());
  absl::StatusOr<BpeTokenizer> tok = BpeTokenizer::FromGguf(*file);
  if (!tok.ok()) return Fail(tok.status());

  PromptEncoding how;
  how.special = !flags->Has("no-special");
  const bool json = flags->Has("json");
  Json out = Json::array();
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = EncodePrompt(*tok, ChatTemplate{}, text, how);
    if (json) {
      Json e = Json::object();
      Json id_list = Json::array(), pieces = Json::array(), hex = Json::array();
      for (int32_t id : ids) {
        id_list.push_back(id);
        pieces.push_back(SanitizeUtf8(tok->TokenPiece(id)));
        hex.push_back(absl::BytesToHexString(tok->TokenPiece(id)));
      }
      e["text"] = SanitizeUtf8(text);
      e["ids"] = id_list;
      e["pieces"] = pieces;
      e["pieces_hex"] = hex;
      out.push_back(e);
      continue;
    }
    if (texts.size() > 1) std::printf("%s\n", ShownPiece(text).c_str());
    for (int32_t id : ids) {
      std::printf("%8d -> %s\n", id, ShownPiece(tok->TokenPiece(id)).c_str());
    }
  }
  if (json) std::printf("%s\n", DumpJson(out, 2).c_str());
  return 0;
}

}  // namespace dllm
