// The OpenAI request bodies become the GenerateRequest the gRPC API takes:
// fields map to their proto fields, chat messages go through the model's
// chat template, and every bad field is an error naming it (api_error maps
// it to `param` and a status).
#include "service/http/openai_request.h"

#include "absl/strings/match.h"
#include "engine/tokenizer/chat_template.h"
#include "gtest/gtest.h"
#include "service/engine/request_validation.h"
#include "service/http/api_error.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

class OpenAiRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf");
    auto model = Model::Load(*path_, {IsaLevel::kScalar});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new std::shared_ptr<const Model>(*model);
  }
  static const Model& model() { return **model_; }

  static absl::StatusOr<OpenAiRequest> Parse(OpenAiEndpoint endpoint, const std::string& body) {
    absl::StatusOr<Json> json = ParseJson(body);
    EXPECT_TRUE(json.ok()) << json.status();
    return ParseOpenAiRequest(endpoint, *json, model(), *path_);
  }
  static absl::StatusOr<OpenAiRequest> Completion(const std::string& body) {
    return Parse(OpenAiEndpoint::kCompletions, body);
  }
  // The error's status and param, as the HTTP client sees them.
  static std::pair<int, std::string> ErrorOf(OpenAiEndpoint endpoint, const std::string& body) {
    absl::StatusOr<OpenAiRequest> r = Parse(endpoint, body);
    EXPECT_FALSE(r.ok()) << body;
    if (r.ok()) return {200, ""};
    const ApiError e = ApiErrorFromStatus(r.status(), endpoint);
    return {e.status, e.param};
  }

  static std::string* path_;
  static std::shared_ptr<const Model>* model_;
};
std::string* OpenAiRequestTest::path_ = nullptr;
std::shared_ptr<const Model>* OpenAiRequestTest::model_ = nullptr;

TEST_F(OpenAiRequestTest, FieldsMapToTheGenerateRequest) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({
      "model": "tiny-llada-k", "prompt": "Hello", "max_tokens": 32, "temperature": 0.5,
      "top_p": 0.9, "seed": 42, "stop": ["\n", "END"], "user": "u1", "steps": 16,
      "block_length": 16, "algorithm": "random", "threshold": 0.9, "cfg_scale": 0,
      "top_k": 5, "alg_temp": 0.1, "eps": 0.001, "n": 1, "frequency_penalty": 0,
      "cache": "dual", "cache_refresh": 4})");
  ASSERT_TRUE(r.ok()) << r.status();
  const GenerationRequest& g = r->generate;
  EXPECT_EQ(g.prompt.text, "Hello");
  EXPECT_EQ(g.diffusion.gen_length, 32u);
  EXPECT_EQ(g.diffusion.steps, 16u);
  EXPECT_EQ(g.diffusion.block_length, 16u);
  EXPECT_EQ(g.diffusion.algorithm, Algorithm::kRandom);
  EXPECT_FLOAT_EQ(*g.diffusion.threshold, 0.9f);
  EXPECT_EQ(g.diffusion.cache, CacheMode::kDual);
  EXPECT_EQ(g.diffusion.cache_refresh_steps, 4u);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, 5u);
  EXPECT_EQ(g.sampling.seed, 42u);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r->user, "u1");
  EXPECT_FALSE(r->stream);
  EXPECT_EQ(g.stream.detail, v1::DETAIL_TEXT);
  // The gRPC validation accepts what the parser built.
}

TEST_F(OpenAiRequestTest, WhatItBuildsPassesTheGrpcValidation) {
  // top_p 1 is OpenAI's default and means no top-p: LLaDA, which has none,
  // takes it.
  absl::StatusOr<OpenAiRequest> r = Completion(R"({
      "prompt": "Hello", "max_tokens": 32, "steps": 16, "block_length": 16, "seed": 1,
      "temperature": 0.7, "top_p": 1, "algorithm": "low_confidence", "stop": "x"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.sampling.seed, 1u);
  EXPECT_FALSE(r->generate.sampling.top_p > 0);
  const absl::Status valid = ValidateGenerateRequest(r->generate, model(), *path_).status();
  EXPECT_TRUE(valid.ok()) << valid;
}

// Settings the parser takes but the gRPC validation refuses come back naming
// the body field.
TEST_F(OpenAiRequestTest, RefusedCacheSettingsNameTheBodyField) {
  for (const char* body : {R"({"prompt": "x", "cache_refresh": 4})",
                           R"({"prompt": "x", "cache": "dual", "cache_refresh": 1000})"}) {
    absl::StatusOr<OpenAiRequest> r = Completion(body);
    ASSERT_TRUE(r.ok()) << r.status();
    const absl::Status valid = ValidateGenerateRequest(r->generate, model(), *path_).status();
    ASSERT_FALSE(valid.ok()) << body;
    const ApiError e = ApiErrorFromStatus(valid, OpenAiEndpoint::kCompletions);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "cache_refresh") << body;
    EXPECT_TRUE(absl::StartsWith(e.message, "cache_refresh: ")) << e.message;
  }
  absl::StatusOr<OpenAiRequest> r = Completion(R"({"prompt": "x", "cache": "CACHE_PREFIX"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.diffusion.cache, CacheMode::kPrefix);
}

// The entropy-bound sampler's settings (DiffusionGemma) are named as its
// GGUF keys; on a model without a canvas asking for it is refused, naming
// `sampler`, and its settings on a DiffusionGemma file name their body field.
TEST_F(OpenAiRequestTest, EntropyBoundSettingsMapAndNameTheirFields) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({
      "prompt": "x", "max_tokens": 40, "sampler": "entropy_bound", "eb_max_steps": 12,
      "eb_t_min": 0.3, "eb_t_max": 0.9, "eb_entropy_bound": 0.2, "eb_stability_threshold": 2,
      "eb_confidence_threshold": 0.01, "cache": "exact", "seed": 9})");
  ASSERT_TRUE(r.ok()) << r.status();
  const GenerationRequest::Diffusion& d = r->generate.diffusion;
  EXPECT_EQ(d.sampler, SamplerChoice::kEntropyBound);
  EXPECT_EQ(d.cache, CacheMode::kExact);
  ASSERT_TRUE(d.entropy_bound.has_value());
  EXPECT_EQ(d.entropy_bound->max_steps, 12u);
  EXPECT_FLOAT_EQ(*d.entropy_bound->t_min, 0.3f);
  EXPECT_FLOAT_EQ(*d.entropy_bound->t_max, 0.9f);
  EXPECT_FLOAT_EQ(*d.entropy_bound->entropy_bound, 0.2f);
  EXPECT_EQ(d.entropy_bound->stability_threshold, 2u);
  EXPECT_FLOAT_EQ(*d.entropy_bound->confidence_threshold, 0.01f);
  absl::Status valid = ValidateGenerateRequest(r->generate, model(), *path_).status();
  ASSERT_FALSE(valid.ok());
  EXPECT_EQ(ApiErrorFromStatus(valid, OpenAiEndpoint::kCompletions).param, "sampler");
  // No eb_* field: no entropy_bound message at all (a masked request with
  // one is refused).
  r = Completion(R"({"prompt": "x"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.diffusion.entropy_bound.has_value());

  const std::string gemma_path =
      testing::TestDataDir() + "/logits-dg/tiny-diffusion-gemma-q8_0.gguf";
  auto gemma = Model::Load(gemma_path, {IsaLevel::kScalar});
  ASSERT_TRUE(gemma.ok()) << gemma.status();
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "x", "eb_t_min": 0.9, "eb_t_max": 0.5})", "eb_t_max"},
           {R"({"prompt": "x", "temperature": 0.7})", "temperature"},
           {R"({"prompt": "x", "logprobs": 2})", "logprobs"},
           {R"({"prompt": "x", "sampler": "masked", "eb_max_steps": 3})", ""},
           {R"({"prompt": "x", "cache": "prefix"})", "cache"}}) {
    absl::StatusOr<Json> json = ParseJson(body);
    ASSERT_TRUE(json.ok());
    r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, *json, **gemma, gemma_path);
    ASSERT_TRUE(r.ok()) << r.status();
    valid = ValidateGenerateRequest(r->generate, **gemma, gemma_path).status();
    ASSERT_FALSE(valid.ok()) << body;
    const ApiError e = ApiErrorFromStatus(valid, OpenAiEndpoint::kCompletions);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.message;
  }
  // With nothing the sampler cannot take, it validates.
  absl::StatusOr<Json> json = ParseJson(R"({"prompt": "x", "max_tokens": 20, "eb_max_steps": 4})");
  ASSERT_TRUE(json.ok());
  r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, *json, **gemma, gemma_path);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<GenerationSpec> spec = ValidateGenerateRequest(r->generate, **gemma, gemma_path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->entropy_bound.has_value());
  EXPECT_EQ(spec->entropy_bound->config.max_steps, 4);
  EXPECT_EQ(spec->sampler.gen_length, 20);
  EXPECT_EQ(spec->caching.cache, CacheMode::kExact);
}

// LLaDA2's fields (the official sampler's names) map to DiffusionParams.llada2,
// validate on a llada2 model, and a refusal names the body field.
TEST_F(OpenAiRequestTest, Llada2SettingsMapAndNameTheirFields) {
  const std::string path = testing::TestDataDir() + "/llada2/tiny-llada2-q8_0.gguf";
  auto llada2 = Model::Load(path, {IsaLevel::kScalar});
  ASSERT_TRUE(llada2.ok()) << llada2.status();
  const auto parse = [&](const std::string& body) {
    absl::StatusOr<Json> json = ParseJson(body);
    EXPECT_TRUE(json.ok()) << body;
    return ParseOpenAiRequest(OpenAiEndpoint::kCompletions, *json, **llada2, path);
  };
  absl::StatusOr<OpenAiRequest> r = parse(R"({
      "prompt": "x", "max_tokens": 40, "threshold": 0.7, "editing_threshold": 0.5,
      "max_post_steps": 3, "steps_per_block": 16, "block_length": 8, "temperature": 0.6,
      "top_k": 20, "seed": 5})");
  ASSERT_TRUE(r.ok()) << r.status();
  const GenerationRequest::Diffusion& d = r->generate.diffusion;
  ASSERT_TRUE(d.llada2.has_value());
  EXPECT_FLOAT_EQ(*d.llada2->editing_threshold, 0.5f);
  EXPECT_EQ(d.llada2->max_post_steps, 3u);
  EXPECT_EQ(d.llada2->steps_per_block, 16u);
  absl::StatusOr<GenerationSpec> spec = ValidateGenerateRequest(r->generate, **llada2, path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sampler.family, SamplerFamily::kLlada2);
  EXPECT_EQ(spec->sampler.steps_per_block, 16);
  EXPECT_EQ(spec->sampler.block_length, 8);
  EXPECT_FLOAT_EQ(*spec->sampler.editing_threshold, 0.5f);
  EXPECT_EQ(spec->sampler.max_post_steps, 3);
  EXPECT_EQ(spec->caching.cache, CacheMode::kExact);  // the family's default
  // Without a LLaDA2 field: no llada2 message.
  r = parse(R"({"prompt": "x"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.diffusion.llada2.has_value());
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "x", "steps": 8})", "steps"},
           {R"({"prompt": "x", "cache": "dual"})", "cache"},
           {R"({"prompt": "x", "suffix": "y"})", "suffix"},
           {R"({"prompt": "x", "steps_per_block": 0})", "steps_per_block"},
           {R"({"prompt": "x", "editing_threshold": 2})", "editing_threshold"}}) {
    r = parse(body);
    absl::Status status = r.status();
    if (r.ok()) status = ValidateGenerateRequest(r->generate, **llada2, path).status();
    ASSERT_FALSE(status.ok()) << body;
    const ApiError e = ApiErrorFromStatus(status, OpenAiEndpoint::kCompletions);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.message;
  }
  // On another family the field is refused, not ignored.
  r = Completion(R"({"prompt": "x", "editing_threshold": 0.5})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(ValidateGenerateRequest(r->generate, model(), *path_).ok());
}

TEST_F(OpenAiRequestTest, TokenIdPromptsAndAlgorithmSpellings) {
  absl::StatusOr<OpenAiRequest> r =
      Completion(R"({"prompt": [1, 2, 3], "algorithm": "ALGORITHM_LOW_CONFIDENCE"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.prompt.token_ids.size(), 3u);
  EXPECT_EQ(r->generate.diffusion.algorithm, Algorithm::kLowConfidence);
}

TEST_F(OpenAiRequestTest, ChatMessagesGoThroughTheModelsTemplate) {
  absl::StatusOr<OpenAiRequest> r = Parse(OpenAiEndpoint::kChatCompletions, R"({
      "messages": [{"role": "developer", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                {"type": "text", "text": "there"}]},
                   {"role": "assistant", "content": "Hello."},
                   {"role": "user", "content": "Again"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int32_t> want = EncodeChat(
      model().tokenizer(), model().chat_template(),
      {{"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello."}, {"user", "Again"}});
  const auto& ids = r->generate.prompt.token_ids;
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), want);
}

TEST_F(OpenAiRequestTest, StreamLogprobsAndCanvasChooseTheDetail) {
  absl::StatusOr<OpenAiRequest> r = Completion(
      R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}, "logprobs": 3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stream && r->include_usage && r->logprobs);
  EXPECT_EQ(r->top_logprobs, 3);
  EXPECT_EQ(r->generate.stream.detail, v1::DETAIL_STEPS);
  EXPECT_TRUE(r->generate.stream.include_logprobs);
  EXPECT_EQ(r->generate.stream.top_candidates, 3u);
  r = Completion(R"({"prompt": "x", "stream": true, "dllm_canvas": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.stream.detail, v1::DETAIL_CANVAS);
}

TEST_F(OpenAiRequestTest, BadFieldsAreNamed) {
  const OpenAiEndpoint c = OpenAiEndpoint::kCompletions;
  const OpenAiEndpoint chat = OpenAiEndpoint::kChatCompletions;
  const std::vector<std::tuple<OpenAiEndpoint, std::string, int, std::string>> cases = {
      {c, R"([1])", 400, "body"},
      {c, R"({})", 400, "prompt"},
      {c, R"({"prompt": ["a", "b"]})", 400, "prompt"},
      {c, R"({"prompt": [-1]})", 400, "prompt[0]"},
      {c, R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {c, R"({"prompt": "x", "max_tokens": 1.5})", 400, "max_tokens"},
      {c, R"({"prompt": "x", "temperature": 3})", 400, "temperature"},
      {c, R"({"prompt": "x", "seed": -1})", 400, "seed"},
      {c, R"({"prompt": "x", "stop": ""})", 400, "stop"},
      {c, R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", 400, "stop"},
      {c, R"({"prompt": "x", "stream": "yes"})", 400, "stream"},
      {c, R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400, "stream_options"},
      {c, R"({"prompt": "x", "dllm_canvas": true})", 400, "dllm_canvas"},
      {c, R"({"prompt": "x", "algorithm": "fastest"})", 400, "algorithm"},
      {c, R"({"prompt": "x", "cache": "fast"})", 400, "cache"},
      {c, R"({"prompt": "x", "cache": 2})", 400, "cache"},
      {c, R"({"prompt": "x", "cache_refresh": -1})", 400, "cache_refresh"},
      {c, R"({"prompt": "x", "presence_penalty": 0.5})", 400, "presence_penalty"},
      {c, R"({"prompt": "x", "echo": true})", 400, "echo"},
      {c, R"({"prompt": "x", "logprobs": 9})", 400, "logprobs"},
      {c, R"({"prompt": "x", "model": "other"})", 404, "model"},
      {c, R"({"prompt": "x", "messages": []})", 400, "messages"},
      {chat, R"({"prompt": "x"})", 400, "prompt"},
      {chat, R"({"messages": []})", 400, "messages"},
      {chat, R"({"messages": [{"role": "tool", "content": "x"}]})", 400, "messages[0].role"},
      {chat, R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content"},
      {chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
       "messages[0].content[0]"},
      {chat, R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", 400,
       "messages[0].tool_calls"},
      {chat, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
       "top_logprobs"},
  };
  for (const auto& [endpoint, body, status, param] : cases) {
    EXPECT_EQ(ErrorOf(endpoint, body), std::make_pair(status, param)) << body;
  }
  // Issue #25: more (empty) turns than the context holds are refused before
  // any template is rendered or tokenized.
  std::string many = R"({"messages": [)";
  for (int64_t i = 0; i <= model().config().n_ctx_train; ++i) {
    many += i == 0 ? "" : ",";
    many += R"({"role": "user", "content": ""})";
  }
  many += "]}";
  EXPECT_EQ(ErrorOf(chat, many), std::make_pair(400, std::string("messages")));
}

TEST_F(OpenAiRequestTest, ServedModelIdIsTheGgufNameOrTheFileStem) {
  EXPECT_EQ(ServedModelId(model(), *path_), "tiny-llada-k");
  // Without general.name: the file stem, the same one `model` may name.
  EXPECT_EQ(ModelFileStem("/models/x/tinycode-q4_k_m.gguf"), "tinycode-q4_k_m");
  EXPECT_EQ(ModelFileStem("plain"), "plain");
  EXPECT_EQ(ModelFileName("/m/a.gguf"), "a.gguf");
}

TEST(ApiErrorTest, StatusCodesAndParams) {
  const OpenAiEndpoint c = OpenAiEndpoint::kCompletions;
  struct Case {
    absl::Status status;
    int http;
    std::string param;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("diffusion.gen_length: too long"), 400, "max_tokens"},
      {absl::InvalidArgumentError("sampling.top_p: bad"), 400, "top_p"},
      {absl::InvalidArgumentError("prompt.text: empty"), 400, "prompt"},
      {absl::InvalidArgumentError("no field here"), 400, ""},
      {absl::UnimplementedError("diffusion.cfg_scale: not for dream"), 400, "cfg_scale"},
      {absl::ResourceExhaustedError("server is at capacity: 1 running"), 429, ""},
      {absl::UnavailableError("server is draining"), 503, ""},
      {absl::DeadlineExceededError("late"), 504, ""},
      {absl::InternalError("engine: boom"), 500, ""},
  };
  for (const Case& k : cases) {
    const ApiError e = ApiErrorFromStatus(k.status, c);
    EXPECT_EQ(e.status, k.http) << k.status;
    EXPECT_EQ(e.param, k.param) << k.status;
  }
  EXPECT_EQ(ApiErrorFromStatus(absl::InvalidArgumentError("diffusion.block_length: 5 does not "
                                                          "divide gen_length 16"),
                               c)
                .message,
            "block_length: 5 does not divide gen_length 16");
  // The chat endpoint's prompt is its messages.
  EXPECT_EQ(ApiErrorFromStatus(absl::InvalidArgumentError("prompt.token_ids: too long"),
                               OpenAiEndpoint::kChatCompletions)
                .param,
            "messages");
  const Json body = ApiErrorBody(MakeApiError(401, "no key", "invalid_api_key"));
  EXPECT_EQ(DumpJson(body),
            R"({"error":{"message":"no key","type":"authentication_error","param":null,)"
            R"("code":"invalid_api_key"}})");
}

}  // namespace
}  // namespace dllm
