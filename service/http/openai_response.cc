#include "service/http/openai_response.h"

#include <utility>

namespace dllm {
namespace {

bool IsChat(const CompletionHeader& h) { return h.endpoint == OpenAiEndpoint::kChatCompletions; }

Json Base(const CompletionHeader& h, const char* object) {
  Json j = Json::object();
  j["id"] = h.id;
  j["object"] = object;
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

Json ChunkBase(const CompletionHeader& h) {
  return Base(h, IsChat(h) ? "chat.completion.chunk" : "text_completion");
}

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

Json UsageJson(const v1::Usage& usage) {
  // The input is the prompt and, for infill, the suffix.
  const uint32_t input = usage.prompt_tokens() + usage.suffix_tokens();
  Json u = Json::object();
  u["prompt_tokens"] = input;
  u["completion_tokens"] = usage.generated_tokens();
  u["total_tokens"] = input + usage.generated_tokens();
  return u;
}

Json LogprobsJson(OpenAiEndpoint endpoint, const std::vector<TokenLogprob>& tokens) {
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    Json content = Json::array();
    for (const TokenLogprob& t : tokens) {
      Json top = Json::array();
      for (const auto& [text, logprob] : t.top) {
        top.push_back({{"token", text}, {"logprob", logprob}, {"bytes", Bytes(text)}});
      }
      content.push_back({{"token", t.text},
                         {"logprob", t.logprob},
                         {"bytes", Bytes(t.text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  Json texts = Json::array(), logprobs = Json::array(), top = Json::array(),
       offsets = Json::array();
  size_t offset = 0;
  bool any_top = false;
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.text);
    logprobs.push_back(t.logprob);
    offsets.push_back(offset);
    offset += t.text.size();
    Json alternatives = Json::object();
    for (const auto& [text, logprob] : t.top) alternatives[text] = logprob;
    any_top = any_top || !t.top.empty();
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", texts},
          {"token_logprobs", logprobs},
          {"top_logprobs", any_top ? top : Json(nullptr)},
          {"text_offset", offsets}};
}

Json DeltaChunk(const CompletionHeader& h, absl::string_view text, bool first) {
  Json choice = Json::object();
  choice["index"] = 0;
  if (IsChat(h)) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    delta["content"] = std::string(text);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  Json j = ChunkBase(h);
  j["choices"] = Json::array({std::move(choice)});
  return j;
}

Json FinishChunk(const CompletionHeader& h, absl::string_view finish_reason, Json logprobs) {
  Json choice = Json::object();
  choice["index"] = 0;
  if (IsChat(h)) {
    choice["delta"] = Json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::string(finish_reason);
  Json j = ChunkBase(h);
  j["choices"] = Json::array({std::move(choice)});
  return j;
}

Json UsageChunk(const CompletionHeader& h, const v1::Usage& usage) {
  Json j = ChunkBase(h);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage);
  return j;
}

Json WholeResponse(const CompletionHeader& h, absl::string_view text,
                   absl::string_view finish_reason, Json logprobs, const v1::Usage& usage) {
  Json choice = Json::object();
  choice["index"] = 0;
  if (IsChat(h)) {
    choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}};
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::string(finish_reason);
  Json j = Base(h, IsChat(h) ? "chat.completion" : "text_completion");
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = UsageJson(usage);
  return j;
}

Json DllmExtras(const v1::Final& final, absl::string_view request_id) {
  Json d = Json::object();
  d["request_id"] = std::string(request_id);
  d["seed"] = final.seed();
  d["steps"] = final.usage().steps();
  d["forward_passes"] = final.usage().forward_passes();
  d["exited_early"] = final.exited_early();
  d["total_seconds"] = final.timings().total_seconds();
  d["queue_seconds"] = final.timings().queue_seconds();
  d["token_ids"] = Json(std::vector<uint32_t>(final.token_ids().begin(), final.token_ids().end()));
  return d;
}

}  // namespace dllm
