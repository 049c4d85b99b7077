// `dllm inspect` on every model (facts against MANIFEST.json), and the
// binary's contract on malformed files: one line on stderr, exit code 2,
// never a signal.
#include "service/cli/inspect_command.h"

#include <cstdio>
#include <filesystem>
#include <random>

#include "engine/base/utf8.h"
#include "engine/model/forward.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::RunDllm;
using testing::RunResult;

const Json* ManifestEntry(const std::string& file) {
  static const Json manifest = *ReadJsonFile(testing::TestDataDir() + "/models/MANIFEST.json");
  for (const Json& e : manifest) {
    if (e["file"].get<std::string>() == file) return &e;
  }
  return nullptr;
}

TEST(InspectCommandTest, ReportsTheManifestFactsForEveryModel) {
  for (const std::string& path : testing::AllTestModels()) {
    SCOPED_TRACE(path);
    const RunResult r = RunDllm("inspect --json " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = ParseJson(r.out);
    ASSERT_TRUE(report.ok()) << report.status();
    const Json* m = ManifestEntry(std::filesystem::path(path).filename().string());
    ASSERT_NE(m, nullptr);
    const Json& kv = (*m)["kv"];
    const std::string arch = kv["general.architecture"].get<std::string>();
    const Json& hp = (*report)["hyperparameters"];
    EXPECT_EQ((*report)["architecture"].get<std::string>(), arch);
    EXPECT_EQ(hp["n_layer"].get<int64_t>(), kv[arch + ".block_count"].get<int64_t>());
    EXPECT_EQ(hp["n_embd"].get<int64_t>(), kv[arch + ".embedding_length"].get<int64_t>());
    EXPECT_EQ(hp["n_head"].get<int64_t>(), kv[arch + ".attention.head_count"].get<int64_t>());
    EXPECT_EQ(hp["n_head_kv"].get<int64_t>(), kv[arch + ".attention.head_count_kv"].get<int64_t>());
    EXPECT_EQ(hp["n_ff"].get<int64_t>(), kv[arch + ".feed_forward_length"].get<int64_t>());
    EXPECT_EQ(hp["n_vocab"].get<int64_t>(), kv["n_vocab"].get<int64_t>());
    EXPECT_EQ(hp["n_ctx_train"].get<int64_t>(), kv[arch + ".context_length"].get<int64_t>());
    EXPECT_EQ(hp["rope_type"].get<std::string>(), arch == "llada" ? "norm" : "neox");
    EXPECT_FLOAT_EQ(hp["rope_theta"].get<double>(), kv[arch + ".rope.freq_base"].get<double>());
    const Json& tok = (*report)["tokenizer"];
    EXPECT_EQ(tok["pre"].get<std::string>(), kv["tokenizer.ggml.pre"].get<std::string>());
    EXPECT_EQ(tok["mask_token_id"].get<int64_t>(),
              kv["tokenizer.ggml.mask_token_id"].get<int64_t>());
    EXPECT_EQ(tok["bos_token_id"].get<int64_t>(), kv["tokenizer.ggml.bos_token_id"].get<int64_t>());
    EXPECT_EQ(tok["eos_token_id"].get<int64_t>(), kv["tokenizer.ggml.eos_token_id"].get<int64_t>());
    EXPECT_EQ((*report)["tensors"].size(), (*m)["tensors"].size());
    for (const auto& [type, count] : (*m)["tensor_type_counts"].items()) {
      EXPECT_EQ((*report)["tensor_totals"][type]["count"].get<int64_t>(), count.get<int64_t>())
          << type;
    }
    EXPECT_TRUE((*report)["compatibility"]["can_run"].get<bool>())
        << DumpJson((*report)["compatibility"]);

    const RunResult text = RunDllm("inspect " + path);
    EXPECT_EQ(text.exit_code, 0);
    EXPECT_NE(text.out.find("compatible    yes"), std::string::npos);
  }
}

TEST(InspectCommandTest, CanvasReportsTheActivationBuffersTheEngineAllocates) {
  const std::string path = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const RunResult r = RunDllm("inspect --json --canvas 160 " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = ParseJson(r.out);
  ASSERT_TRUE(report.ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto config = ModelConfigFromGguf(*file);
  ASSERT_TRUE(config.ok());
  auto model = Model::Load(path, {IsaLevel::kScalar});
  ASSERT_TRUE(model.ok());
  auto pass = ForwardPass::Create(*model, 160);
  ASSERT_TRUE(pass.ok());
  const Json& mem = (*report)["memory"];
  EXPECT_EQ(mem["activation_bytes"].get<int64_t>(),
            static_cast<int64_t>((*pass)->activation_bytes()));
  EXPECT_EQ(mem["logits_bytes"].get<int64_t>(), 160 * 8256 * 4);
  EXPECT_EQ(mem["peak_bytes_estimate"].get<int64_t>(), static_cast<int64_t>(file->file_size()) +
                                                           mem["activation_bytes"].get<int64_t>() +
                                                           mem["logits_bytes"].get<int64_t>());
  EXPECT_EQ(RunDllm("inspect --canvas x " + path).exit_code, 2);
}

TEST(InspectCommandTest, MalformedFilesGiveOneLineAndExitTwo) {
  const std::string dir = testing::TempDir();
  const std::string model =
      testing::ReadFileOrDie(testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf");
  std::vector<std::pair<std::string, std::string>> files = {
      {"empty.gguf", ""},
      {"text.gguf", "hello world, not a model\n"},
      {"cut-header.gguf", model.substr(0, 5000)},
      {"cut-data.gguf", model.substr(0, model.size() - 100)},
  };
  testing::GgufBuilder b;
  b.AddTensor({"w", 0, {4}, std::string(16, '\0'), 8});
  files.push_back({"misaligned.gguf", b.Build()});
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    testing::WriteFileOrDie(dir + "/" + name, bytes);
    const RunResult r = RunDllm("inspect " + dir + "/" + name);
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty());
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
  const RunResult missing = RunDllm("inspect " + dir + "/nope.gguf");
  EXPECT_EQ(missing.exit_code, 2);
}

TEST(InspectCommandTest, UnrunnableFileSaysExactlyWhy) {
  testing::GgufBuilder b = testing::TinyModelBuilder("llada");
  b.tensors()[1].type = 1;  // output_norm.weight as F16
  b.tensors()[1].data.resize(64);
  const std::string path = testing::TempDir() + "/f16norm.gguf";
  testing::WriteFileOrDie(path, b.Build());
  const RunResult r = RunDllm("inspect " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compatible    no"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output_norm.weight is F16; 1-D tensors must be F32"), std::string::npos);
}

TEST(InspectCommandTest, DoctorGivesAVerdict) {
  const RunResult r =
      RunDllm("doctor " + testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf");
  EXPECT_FALSE(r.signaled);
  EXPECT_NE(r.out.find("verdict: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model: llada, 2 layers"), std::string::npos) << r.out;
  EXPECT_EQ(r.exit_code, r.out.find("NOT READY") == std::string::npos ? 0 : 1);
  const RunResult bad = RunDllm("doctor /nonexistent.gguf");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("[FAIL] model:"), std::string::npos);
}

// Files the loader refuses for a reason past parsing, each with the
// mutation that makes it so, from the tiny builder models.
struct Refused {
  std::string name;
  std::string bytes;
};

std::vector<Refused> RefusedModels() {
  using testing::GgufBuilder;
  std::vector<Refused> out;
  auto add = [&out](std::string name, const GgufBuilder& b) {
    out.push_back({std::move(name), b.Build()});
  };
  auto with_key = [](const std::string& arch, auto edit) {
    GgufBuilder b = testing::TinyModelBuilder(arch);
    edit(b);
    return b;
  };
  auto set_str = [](const std::string& key, const std::string& v) {
    return [key, v](GgufBuilder& b) { b.Drop(key).Str(key, v); };
  };
  auto set_u32 = [](const std::string& key, uint32_t v) {
    return [key, v](GgufBuilder& b) { b.Drop(key).U32(key, v); };
  };
  add("unknown-arch", with_key("llada", set_str("general.architecture", "bert")));
  add("pre-tokenizer", with_key("dream", set_str("tokenizer.ggml.pre", "starcoder")));
  add("tokenizer-model", with_key("dream", set_str("tokenizer.ggml.model", "llama")));
  add("mask-outside-vocab", with_key("llada", set_u32("tokenizer.ggml.mask_token_id", 9999)));
  add("no-mask", with_key("llada", [](GgufBuilder& b) { b.Drop("tokenizer.ggml.mask_token_id"); }));
  add("mask-is-eos", with_key("llada", set_u32("tokenizer.ggml.eos_token_id", 258)));
  add("context-1", with_key("llada", set_u32("llada.context_length", 1)));
  add("merges-garbage", with_key("llada", [](GgufBuilder& b) {
        b.Drop("tokenizer.ggml.merges").StrArray("tokenizer.ggml.merges", {"\xff\xfe x"});
      }));
  {
    GgufBuilder b = testing::TinyModelBuilder("llada");
    b.tensors()[3].ne = {32, 7};  // attn_q with 7 outputs
    b.tensors()[3].data.resize(32 * 7 * 4);
    add("wrong-shape", b);
  }
  {
    GgufBuilder b = testing::TinyModelBuilder("dream");
    b.tensors().erase(b.tensors().begin() + 4);
    add("missing-tensor", b);
  }
  {
    GgufBuilder b = testing::TinyModelBuilder("llada");
    b.AddTensor("blk.0.rope_freqs.weight", 0, {4});
    add("unexpected-tensor", b);
  }
  for (const char* arch : {"llada-moe", "rnd1"}) {
    const std::string a = arch;
    add(a + "-used-over-count", with_key(a, set_u32(a + ".expert_used_count", 5)));
    add(a + "-count-vs-tensors", with_key(a, set_u32(a + ".expert_count", 8)));
    add(a + "-ffn-vs-tensors", with_key(a, set_u32(a + ".expert_feed_forward_length", 32)));
    add(a + "-no-expert-count", with_key(a, [&a](GgufBuilder& b) { b.Drop(a + ".expert_count"); }));
  }
  return out;
}

TEST(InspectCommandTest, SaysNoWithTheLoadersOwnMessageForEveryRefusedFile) {
  const std::string dir = testing::TempDir();
  int refused_by_model_checks = 0;
  for (const Refused& r : RefusedModels()) {
    SCOPED_TRACE(r.name);
    const std::string path = dir + "/" + r.name + ".gguf";
    testing::WriteFileOrDie(path, r.bytes);
    absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::Load(path, {IsaLevel::kScalar});
    ASSERT_FALSE(loaded.ok()) << "the loader accepts " << r.name;
    const RunResult text = RunDllm("inspect " + path);
    EXPECT_FALSE(text.signaled);
    const std::string message(loaded.status().message());
    auto file = GgufFile::Open(path);
    if (!file.ok()) {  // refused by the reader: inspect fails the same way
      EXPECT_EQ(text.exit_code, 2);
      EXPECT_NE(text.err.find(PrintableText(message)), std::string::npos) << text.err;
      continue;
    }
    ++refused_by_model_checks;
    auto report = InspectReport(*file);
    ASSERT_TRUE(report.ok()) << report.status();
    const Json& compat = (*report)["compatibility"];
    EXPECT_FALSE(compat["can_run"].get<bool>());
    ASSERT_GE(compat["problems"].size(), 1u);
    EXPECT_EQ(compat["problems"][0].get<std::string>(), message);
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("compatible    no"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find(PrintableText(message)), std::string::npos) << text.out;
  }
  EXPECT_GE(refused_by_model_checks, 15);
}

// Every malformed-file case of the reader (gguf_hostile_test's rules) and
// random byte flips of a valid model: inspect's verdict is the loader's.
TEST(InspectCommandTest, AgreesWithTheLoaderOnMutatedFiles) {
  const std::string dir = testing::TempDir();
  std::string base = testing::TinyModelBuilder("rnd1").Build();
  std::mt19937 rng(5);
  int agreed_yes = 0, agreed_no = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = base;
    // Flip 1-3 bytes in the metadata and tensor-info part (the first 6 KiB).
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % std::min<size_t>(bytes.size(), 6144)] ^= static_cast<char>(1 << (rng() % 8));
    }
    const std::string path = dir + "/mutated.gguf";
    testing::WriteFileOrDie(path, bytes);
    absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::Load(path, {IsaLevel::kScalar});
    auto file = GgufFile::Open(path);
    if (!file.ok()) {
      EXPECT_FALSE(loaded.ok());
      ++agreed_no;
      continue;
    }
    auto report = InspectReport(*file);
    ASSERT_TRUE(report.ok()) << report.status();
    const Json& compat = (*report)["compatibility"];
    ASSERT_EQ(compat["can_run"].get<bool>(), loaded.ok())
        << "trial " << trial << ": "
        << (loaded.ok() ? std::string("loads") : std::string(loaded.status().message()));
    if (!loaded.ok()) {
      EXPECT_EQ(compat["problems"][0].get<std::string>(), loaded.status().message());
      ++agreed_no;
    } else {
      ++agreed_yes;
    }
  }
  std::printf("mutations: %d loadable, %d refused; inspect agreed on all\n", agreed_yes, agreed_no);
  EXPECT_GT(agreed_no, 0);
}

TEST(InspectCommandTest, MoeFilesShowTheirExperts) {
  const std::string path = testing::TempDir() + "/rnd1.gguf";
  testing::WriteFileOrDie(path, testing::TinyModelBuilder("rnd1").Build());
  const RunResult r = RunDllm("inspect --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = ParseJson(r.out);
  ASSERT_TRUE(report.ok());
  const Json& hp = (*report)["hyperparameters"];
  EXPECT_EQ(hp["n_expert"].get<int64_t>(), 4);
  EXPECT_EQ(hp["n_expert_used"].get<int64_t>(), 2);
  EXPECT_EQ(hp["n_ff_exp"].get<int64_t>(), 16);
  EXPECT_TRUE(hp["expert_weights_norm"].get<bool>());
  // Per layer: q, k, v, o (32x32 each), the router (32x4), 2 of 4 experts x 3 x 32x16.
  EXPECT_EQ(hp["active_layer_params"].get<int64_t>(), 2 * (4 * 32 * 32 + 32 * 4 + 2 * 3 * 32 * 16));
  EXPECT_TRUE((*report)["compatibility"]["can_run"].get<bool>());
  const RunResult text = RunDllm("inspect " + path);
  EXPECT_NE(
      text.out.find("experts       4, 2 active per token, FFN width 16, weights renormalised"),
      std::string::npos)
      << text.out;
}

// LLaDA2's routing and blocks (the fork-written tiny file).
TEST(InspectCommandTest, Llada2FilesShowTheirRouting) {
  const std::string path = testing::TestDataDir() + "/llada2/tiny-llada2-q8_0.gguf";
  const RunResult r = RunDllm("inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("experts       16, 4 active per token, FFN width 32, weights renormalised"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("routing       sigmoid, 4 groups (2 kept), x2.5, shared expert of 32, 1 "
                       "dense layer(s); RoPE on 8 of 16 dims; blocks of 32"),
            std::string::npos)
      << r.out;
}

TEST(InspectCommandTest, EveryCommandAnswersHelp) {
  for (const char* command :
       {"inspect", "doctor", "logits", "generate", "synth", "bench", "tokenize"}) {
    SCOPED_TRACE(command);
    for (const char* flag : {"--help", "-h"}) {
      const RunResult r = RunDllm(std::string(command) + " " + flag);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find(std::string("usage: dllm ") + command), std::string::npos) << r.out;
    }
  }
  const RunResult top = RunDllm("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("tokenize"), std::string::npos);
}

}  // namespace
}  // namespace dllm
