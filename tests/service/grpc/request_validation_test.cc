// Request validation without a server: defaults match `dllm generate`, and
// every invalid field is INVALID_ARGUMENT naming it.
#include "gtest/gtest.h"
#include "service/grpc/proto_request.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

class RequestValidationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llada_path_ = new std::string(testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf");
    dream_path_ = new std::string(testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf");
    auto llada = Model::Load(*llada_path_, {IsaLevel::kScalar});
    auto dream = Model::Load(*dream_path_, {IsaLevel::kScalar});
    ASSERT_TRUE(llada.ok() && dream.ok());
    llada_ = new std::shared_ptr<const Model>(*llada);
    dream_ = new std::shared_ptr<const Model>(*dream);
  }
  static const Model& llada() { return **llada_; }
  static const Model& dream() { return **dream_; }

  static v1::GenerateRequest Text(const std::string& text) {
    v1::GenerateRequest r;
    r.mutable_prompt()->set_text(text);
    return r;
  }
  absl::Status Llada(const v1::GenerateRequest& r) {
    return ValidateGenerateRequest(r, llada(), *llada_path_).status();
  }
  absl::Status Dream(const v1::GenerateRequest& r) {
    return ValidateGenerateRequest(r, dream(), *dream_path_).status();
  }

  static std::string* llada_path_;
  static std::string* dream_path_;
  static std::shared_ptr<const Model>* llada_;
  static std::shared_ptr<const Model>* dream_;
};
std::string* RequestValidationTest::llada_path_;
std::string* RequestValidationTest::dream_path_;
std::shared_ptr<const Model>* RequestValidationTest::llada_;
std::shared_ptr<const Model>* RequestValidationTest::dream_;

TEST_F(RequestValidationTest, DefaultsMirrorTheCli) {
  auto spec = ValidateGenerateRequest(Text("The capital of France is"), llada(), *llada_path_);
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(spec->sampler.gen_length, 128);
  EXPECT_EQ(spec->sampler.steps, 128);
  EXPECT_EQ(spec->sampler.block_length, 32);
  EXPECT_EQ(spec->sampler.algorithm, Algorithm::kLowConfidence);
  EXPECT_EQ(spec->sampler.temperature, 0.0f);
  EXPECT_TRUE(spec->sampler.early_exit);
  EXPECT_FALSE(spec->seed_was_set);
  EXPECT_EQ(spec->stream.detail, v1::DETAIL_TEXT);
  EXPECT_EQ(spec->stream.step_stride, 1);
  EXPECT_EQ(spec->stream.heartbeat_seconds, 10);
  EXPECT_EQ(spec->request_id.rfind("req-", 0), 0u);
  EXPECT_EQ(spec->prompt, llada().tokenizer().Encode("The capital of France is", true, true));

  auto dream_spec = ValidateGenerateRequest(Text("hi"), dream(), *dream_path_);
  ASSERT_THAT(dream_spec.status(), IsOk());
  EXPECT_EQ(dream_spec->sampler.algorithm, Algorithm::kEntropy);
  EXPECT_EQ(dream_spec->sampler.block_length, 0);

  v1::GenerateRequest r = Text("hi");
  r.set_request_id("my-id");
  r.mutable_sampling()->set_seed(42);
  r.mutable_diffusion()->set_gen_length(48);  // not a multiple of 32: one block
  spec = ValidateGenerateRequest(r, llada(), *llada_path_);
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(spec->request_id, "my-id");
  EXPECT_TRUE(spec->seed_was_set);
  EXPECT_EQ(spec->sampler.seed, 42u);
  EXPECT_EQ(spec->sampler.block_length, 0);
  EXPECT_EQ(spec->sampler.steps, 48);
}

TEST_F(RequestValidationTest, ChatTemplateAndModelNames) {
  v1::GenerateRequest r = Text("hello");
  r.mutable_prompt()->set_apply_chat_template(true);
  auto spec = ValidateGenerateRequest(r, llada(), *llada_path_);
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(spec->prompt,
            EncodeChat(llada().tokenizer(), llada().chat_template(), {{"user", "hello"}}));
  for (const std::string& name : {llada().config().name, std::string("tiny-llada-k-q4_k_m.gguf"),
                                  std::string("tiny-llada-k-q4_k_m")}) {
    r.set_model(name);
    EXPECT_THAT(Llada(r), IsOk()) << name;
  }
}

TEST_F(RequestValidationTest, EveryInvalidFieldIsNamed) {
  struct Case {
    const char* what;
    std::function<void(v1::GenerateRequest*)> edit;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no prompt", [](auto* r) { r->clear_prompt(); }, absl::StatusCode::kInvalidArgument,
       "prompt: empty"},
      {"empty text", [](auto* r) { r->mutable_prompt()->set_text(""); },
       absl::StatusCode::kInvalidArgument, "prompt.text: empty"},
      {"bad utf-8", [](auto* r) { r->mutable_prompt()->set_text("ab\xc3\x28"); },
       absl::StatusCode::kInvalidArgument, "prompt.text: invalid UTF-8 at byte 2"},
      {"overlong utf-8", [](auto* r) { r->mutable_prompt()->set_text("\xc0\xaf"); },
       absl::StatusCode::kInvalidArgument, "prompt.text: invalid UTF-8 at byte 0"},
      {"system without chat", [](auto* r) { r->mutable_prompt()->set_system("be brief"); },
       absl::StatusCode::kInvalidArgument, "prompt.system"},
      {"empty ids", [](auto* r) { r->mutable_prompt()->mutable_token_ids(); },
       absl::StatusCode::kInvalidArgument, "prompt.token_ids: empty"},
      {"id past vocab",
       [](auto* r) {
         r->mutable_prompt()->mutable_token_ids()->add_ids(1);
         r->mutable_prompt()->mutable_token_ids()->add_ids(9000);
       },
       absl::StatusCode::kInvalidArgument,
       "prompt.token_ids.ids[1]: 9000 is outside the vocabulary"},
      {"mask id", [](auto* r) { r->mutable_prompt()->mutable_token_ids()->add_ids(8194); },
       absl::StatusCode::kInvalidArgument, "prompt.token_ids.ids[0]: 8194 is the mask token"},
      {"unknown model", [](auto* r) { r->set_model("gpt-5"); }, absl::StatusCode::kInvalidArgument,
       "model: model 'gpt-5' is not served"},
      {"block does not divide", [](auto* r) { r->mutable_diffusion()->set_block_length(24); },
       absl::StatusCode::kInvalidArgument,
       "diffusion.block_length: 24 does not divide gen_length 128"},
      {"steps > gen_length", [](auto* r) { r->mutable_diffusion()->set_steps(129); },
       absl::StatusCode::kInvalidArgument, "diffusion.steps: 129 exceeds gen_length 128"},
      {"steps vs blocks", [](auto* r) { r->mutable_diffusion()->set_steps(6); },
       absl::StatusCode::kInvalidArgument, "diffusion.steps: 6 is not divisible"},
      {"gen past context", [](auto* r) { r->mutable_diffusion()->set_gen_length(5000); },
       absl::StatusCode::kInvalidArgument,
       "diffusion.gen_length: 5000 exceeds the model's context"},
      {"prompt + gen past context",
       [](auto* r) {
         r->mutable_diffusion()->set_gen_length(1024);
         r->mutable_diffusion()->set_block_length(1024);
       },
       absl::StatusCode::kInvalidArgument, "diffusion.gen_length: prompt"},
      {"unknown algorithm",
       [](auto* r) { r->mutable_diffusion()->set_algorithm(static_cast<v1::Algorithm>(42)); },
       absl::StatusCode::kInvalidArgument, "diffusion.algorithm: unknown value 42"},
      {"dream algorithm on llada",
       [](auto* r) { r->mutable_diffusion()->set_algorithm(v1::ALGORITHM_ENTROPY); },
       absl::StatusCode::kInvalidArgument, "diffusion.algorithm: ALGORITHM_ENTROPY does not fit"},
      {"negative temperature", [](auto* r) { r->mutable_sampling()->set_temperature(-1); },
       absl::StatusCode::kInvalidArgument, "sampling.temperature"},
      {"top_p on llada", [](auto* r) { r->mutable_sampling()->set_top_p(0.5f); },
       absl::StatusCode::kInvalidArgument, "sampling.top_p"},
      {"threshold range", [](auto* r) { r->mutable_diffusion()->set_threshold(1.5f); },
       absl::StatusCode::kInvalidArgument, "diffusion.threshold"},
      {"eps NaN on llada",
       [](auto* r) { r->mutable_diffusion()->set_eps(std::numeric_limits<float>::quiet_NaN()); },
       absl::StatusCode::kInvalidArgument, "diffusion.eps: nan must be in (0, 1)"},
      {"eps negative on llada", [](auto* r) { r->mutable_diffusion()->set_eps(-1); },
       absl::StatusCode::kInvalidArgument, "diffusion.eps: -1 must be in (0, 1)"},
      {"eps above one on llada", [](auto* r) { r->mutable_diffusion()->set_eps(2); },
       absl::StatusCode::kInvalidArgument, "diffusion.eps: 2 must be in (0, 1)"},
      {"cfg negative", [](auto* r) { r->mutable_diffusion()->set_cfg_scale(-1); },
       absl::StatusCode::kInvalidArgument, "diffusion.cfg_scale"},
      {"unknown cache",
       [](auto* r) { r->mutable_diffusion()->set_cache(static_cast<v1::Cache>(9)); },
       absl::StatusCode::kInvalidArgument, "diffusion.cache: unknown value 9"},
      {"refresh without a cache",
       [](auto* r) { r->mutable_diffusion()->set_cache_refresh_steps(4); },
       absl::StatusCode::kInvalidArgument,
       "diffusion.cache_refresh_steps: 4 needs a cache (prefix or dual)"},
      {"refresh past gen_length",
       [](auto* r) {
         r->mutable_diffusion()->set_cache(v1::CACHE_DUAL);
         r->mutable_diffusion()->set_cache_refresh_steps(129);
       },
       absl::StatusCode::kInvalidArgument,
       "diffusion.cache_refresh_steps: 129 exceeds gen_length 128"},
      {"too many candidates",
       [](auto* r) {
         r->mutable_stream()->set_detail(v1::DETAIL_STEPS);
         r->mutable_stream()->set_top_candidates(9);
       },
       absl::StatusCode::kInvalidArgument, "stream.top_candidates: 9 exceeds the limit of 8"},
      {"candidates need steps", [](auto* r) { r->mutable_stream()->set_top_candidates(2); },
       absl::StatusCode::kInvalidArgument, "stream.top_candidates"},
      {"unknown detail",
       [](auto* r) { r->mutable_stream()->set_detail(static_cast<v1::Detail>(17)); },
       absl::StatusCode::kInvalidArgument, "stream.detail: unknown value 17"},
      {"request id too long", [](auto* r) { r->set_request_id(std::string(200, 'x')); },
       absl::StatusCode::kInvalidArgument, "request_id"},
      {"request id control char", [](auto* r) { r->set_request_id("a\nb"); },
       absl::StatusCode::kInvalidArgument, "request_id"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Text("hello");
    c.edit(&r);
    EXPECT_THAT(Llada(r), StatusIs(c.code, c.message)) << c.what;
  }
}

// Issue #25 N2: special-token texts are parsed in text prompts, so the mask
// token's text would have put a mask id into the prompt (the sampler then
// generated into the prompt). Every text field that reaches the tokenizer
// refuses it, on both families, and names the field; Tokenize still shows it.
TEST_F(RequestValidationTest, MaskTokenTextIsRefusedInEveryTextField) {
  for (const Model* model : {&llada(), &dream()}) {
    const std::string mask = model->tokenizer().TokenPiece(model->config().tokens.mask);
    ASSERT_THAT(mask, ::testing::AnyOf("<|mdm_mask|>", "<|mask|>"));
    const std::string& path = model == &llada() ? *llada_path_ : *dream_path_;
    auto check = [&](v1::GenerateRequest r, const std::string& field) {
      EXPECT_THAT(ValidateGenerateRequest(r, *model, path).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           absl::StrCat(field, ": contains the mask token '", mask, "'")))
          << field;
      v1::Open open;
      *open.mutable_prompt() = r.prompt();
      EXPECT_THAT(ValidateOpen(open, *model, path).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument, field))
          << "Open " << field;
    };
    check(Text(absl::StrCat("a ", mask, " b")), "prompt.text");
    check(Text(mask), "prompt.text");
    v1::GenerateRequest r = Text(absl::StrCat("x", mask));
    r.mutable_prompt()->set_apply_chat_template(true);
    check(r, "prompt.text");
    r = Text("hello");
    r.mutable_prompt()->set_apply_chat_template(true);
    r.mutable_prompt()->set_system(absl::StrCat("be ", mask));
    check(r, "prompt.system");
    // The bytes of the text alone, split so that no token is the mask, pass.
    EXPECT_THAT(
        ValidateGenerateRequest(Text(mask.substr(0, 3) + " " + mask.substr(3)), *model, path)
            .status(),
        IsOk());
  }
  // The system text has its own byte bound, named (it blamed gen_length).
  v1::GenerateRequest r = Text("hello");
  r.mutable_prompt()->set_apply_chat_template(true);
  r.mutable_prompt()->set_system(
      std::string(llada().config().n_ctx_train * llada().tokenizer().max_token_bytes() + 1, 'a'));
  EXPECT_THAT(Llada(r), StatusIs(absl::StatusCode::kInvalidArgument, "prompt.system: "));
}

TEST_F(RequestValidationTest, CacheSettingsReachTheCachingOptions) {
  v1::GenerateRequest r = Text("hello");
  absl::StatusOr<GenerationSpec> spec = ValidateGenerateRequest(r, llada(), *llada_path_);
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(spec->caching.cache, CacheMode::kNone);
  for (const auto& [proto, mode] : {std::pair{v1::CACHE_NONE, CacheMode::kNone},
                                    {v1::CACHE_PREFIX, CacheMode::kPrefix},
                                    {v1::CACHE_DUAL, CacheMode::kDual}}) {
    r.mutable_diffusion()->set_cache(proto);
    r.mutable_diffusion()->set_cache_refresh_steps(proto == v1::CACHE_NONE ? 0 : 8);
    spec = ValidateGenerateRequest(r, llada(), *llada_path_);
    ASSERT_THAT(spec.status(), IsOk());
    EXPECT_EQ(spec->caching.cache, mode);
    EXPECT_EQ(spec->caching.cache_refresh_steps, proto == v1::CACHE_NONE ? 0 : 8);
  }
}

TEST_F(RequestValidationTest, DreamSpecificFields) {
  v1::GenerateRequest r = Text("hello");
  r.mutable_diffusion()->set_algorithm(v1::ALGORITHM_LOW_CONFIDENCE);
  EXPECT_THAT(Dream(r), StatusIs(absl::StatusCode::kInvalidArgument, "diffusion.algorithm"));
  // A block length opts Dream into Fast-dLLM's blocks, under LLaDA's rules.
  r = Text("hello");
  r.mutable_diffusion()->set_block_length(32);
  EXPECT_THAT(Dream(r), IsOk());
  r.mutable_diffusion()->set_block_length(48);
  EXPECT_THAT(Dream(r), StatusIs(absl::StatusCode::kInvalidArgument, "diffusion.block_length"));
  r = Text("hello");
  r.mutable_diffusion()->set_eps(2);
  EXPECT_THAT(Dream(r), StatusIs(absl::StatusCode::kInvalidArgument, "diffusion.eps"));
  r = Text("hello");
  r.mutable_sampling()->set_top_p(0.9f);
  r.mutable_sampling()->set_top_k(20);
  EXPECT_THAT(Dream(r), IsOk());
}

TEST_F(RequestValidationTest, OpenUsesTheSameRules) {
  v1::Open open;
  EXPECT_THAT(ValidateOpen(open, llada(), *llada_path_).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "prompt"));
  open.mutable_prompt()->set_text("hi");
  open.mutable_diffusion()->set_gen_length(32);
  auto spec = ValidateOpen(open, llada(), *llada_path_);
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(spec->sampler.gen_length, 32);
}

TEST_F(RequestValidationTest, SuffixIsTheInfillTail) {
  v1::GenerateRequest r = Text("def f(x):");
  r.mutable_prompt()->mutable_suffix()->set_text("\nprint(f(1))\n");
  r.mutable_diffusion()->set_gen_length(16);
  absl::StatusOr<GenerationSpec> spec = ValidateGenerateRequest(r, dream(), *dream_path_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  // No BOS, special-token texts kept as text.
  EXPECT_EQ(spec->suffix, dream().tokenizer().Encode("\nprint(f(1))\n", false, false));
  EXPECT_EQ(spec->canvas_tokens(),
            static_cast<int>(spec->prompt.size() + spec->suffix.size()) + 16);
  r.mutable_prompt()->mutable_suffix()->mutable_token_ids()->add_ids(5);
  spec = ValidateGenerateRequest(r, dream(), *dream_path_);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->suffix, std::vector<int32_t>{5});

  const int64_t n_ctx = dream().config().n_ctx_train;
  const int32_t mask = dream().config().tokens.mask;
  const std::pair<std::function<void(v1::Prompt*)>, std::string> bad[] = {
      {[](v1::Prompt* p) { p->mutable_suffix()->set_text("ok\xff"); },
       "prompt.suffix.text: invalid UTF-8 at byte 2"},
      {[](v1::Prompt* p) { p->mutable_suffix()->set_text(""); }, "prompt.suffix.text: empty"},
      {[](v1::Prompt* p) { p->mutable_suffix()->mutable_token_ids(); },
       "prompt.suffix.token_ids: empty"},
      {[mask](v1::Prompt* p) { p->mutable_suffix()->mutable_token_ids()->add_ids(mask); },
       "prompt.suffix.token_ids.ids[0]: " + std::to_string(mask) + " is the mask token"},
      {[n_ctx](v1::Prompt* p) {
         for (int64_t i = 0; i < n_ctx; ++i) p->mutable_suffix()->mutable_token_ids()->add_ids(5);
       },
       "prompt.suffix: prompt"},
      {[](v1::Prompt* p) {
         p->set_apply_chat_template(true);
         p->mutable_suffix()->set_text("x");
       },
       "prompt.suffix: infill takes a plain prompt"},
  };
  for (const auto& [edit, message] : bad) {
    v1::GenerateRequest b = Text("def f(x):");
    edit(b.mutable_prompt());
    EXPECT_THAT(Dream(b), testing::StatusIs(absl::StatusCode::kInvalidArgument, message));
  }
  // The span that does not fit beside prompt and suffix is gen_length's fault.
  v1::GenerateRequest big = Text("def f(x):");
  for (int i = 0; i < 100; ++i)
    big.mutable_prompt()->mutable_suffix()->mutable_token_ids()->add_ids(5);
  big.mutable_diffusion()->set_gen_length(static_cast<uint32_t>(n_ctx - 100));
  EXPECT_THAT(Dream(big), testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                            "diffusion.gen_length: prompt"));
}

}  // namespace
}  // namespace dllm
