// `dllm inspect` on every model (facts against MANIFEST.json), and the
// binary's contract on malformed files: one line on stderr, exit code 2,
// never a signal.
#include "service/cli/inspect_command.h"

#include <filesystem>

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
  for (const Json& e : manifest.as_array()) {
    if (e["file"].as_string() == file) return &e;
  }
  return nullptr;
}

TEST(InspectCommandTest, ReportsTheManifestFactsForEveryModel) {
  for (const std::string& path : testing::AllTestModels()) {
    SCOPED_TRACE(path);
    const RunResult r = RunDllm("inspect --json " + path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = Json::Parse(r.out);
    ASSERT_TRUE(report.ok()) << report.status();
    const Json* m = ManifestEntry(std::filesystem::path(path).filename().string());
    ASSERT_NE(m, nullptr);
    const Json& kv = (*m)["kv"];
    const std::string arch = kv["general.architecture"].as_string();
    const Json& hp = (*report)["hyperparameters"];
    EXPECT_EQ((*report)["architecture"].as_string(), arch);
    EXPECT_EQ(hp["n_layer"].as_int(), kv[arch + ".block_count"].as_int());
    EXPECT_EQ(hp["n_embd"].as_int(), kv[arch + ".embedding_length"].as_int());
    EXPECT_EQ(hp["n_head"].as_int(), kv[arch + ".attention.head_count"].as_int());
    EXPECT_EQ(hp["n_head_kv"].as_int(), kv[arch + ".attention.head_count_kv"].as_int());
    EXPECT_EQ(hp["n_ff"].as_int(), kv[arch + ".feed_forward_length"].as_int());
    EXPECT_EQ(hp["n_vocab"].as_int(), kv["n_vocab"].as_int());
    EXPECT_EQ(hp["n_ctx_train"].as_int(), kv[arch + ".context_length"].as_int());
    EXPECT_EQ(hp["rope_type"].as_string(), arch == "llada" ? "norm" : "neox");
    EXPECT_FLOAT_EQ(hp["rope_theta"].as_double(), kv[arch + ".rope.freq_base"].as_double());
    const Json& tok = (*report)["tokenizer"];
    EXPECT_EQ(tok["pre"].as_string(), kv["tokenizer.ggml.pre"].as_string());
    EXPECT_EQ(tok["mask_token_id"].as_int(), kv["tokenizer.ggml.mask_token_id"].as_int());
    EXPECT_EQ(tok["bos_token_id"].as_int(), kv["tokenizer.ggml.bos_token_id"].as_int());
    EXPECT_EQ(tok["eos_token_id"].as_int(), kv["tokenizer.ggml.eos_token_id"].as_int());
    EXPECT_EQ((*report)["tensors"].size(), (*m)["tensors"].size());
    for (const auto& [type, count] : (*m)["tensor_type_counts"].as_object()) {
      EXPECT_EQ((*report)["tensor_totals"][type]["count"].as_int(), count.as_int()) << type;
    }
    EXPECT_TRUE((*report)["compatibility"]["can_run"].as_bool())
        << (*report)["compatibility"].Dump();

    const RunResult text = RunDllm("inspect " + path);
    EXPECT_EQ(text.exit_code, 0);
    EXPECT_NE(text.out.find("compatible    yes"), std::string::npos);
  }
}

TEST(InspectCommandTest, CanvasReportsTheActivationBuffersTheEngineAllocates) {
  const std::string path = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const RunResult r = RunDllm("inspect --json --canvas 160 " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = Json::Parse(r.out);
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
  EXPECT_EQ(mem["activation_bytes"].as_int(), static_cast<int64_t>((*pass)->activation_bytes()));
  EXPECT_EQ(mem["logits_bytes"].as_int(), 160 * 8256 * 4);
  EXPECT_EQ(mem["peak_bytes_estimate"].as_int(),
            static_cast<int64_t>(file->file_size()) + mem["activation_bytes"].as_int() +
                mem["logits_bytes"].as_int());
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

}  // namespace
}  // namespace dllm
