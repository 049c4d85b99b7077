// The forward pass against two references per model and canvas (see
// shared/reference/logits-exact/README.md): the float64 "exact" logits on the
// same dequantized weights, and llama.cpp's (reported, not required).
//
// Tolerances, and why:
// - F32/F16/BF16 weights run in float32 with float32 activations, so against
//   exact math every full row must have cosine >= 0.99999 and max |diff| <=
//   1e-3 (float32 accumulation over K <= 768 and 2-4 layers stays near 1e-5;
//   llama.cpp with flash attention off reaches ~1e-5).
// - Quantized weights: rms difference <= 1.15 x llama.cpp's own rms
//   difference on the same canvas (it quantizes activations too), and the
//   exact top-1 token on every row whose exact top-2 margin is >= 0.5.
#include "engine/model/forward.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "service/json/json.h"
#include "gtest/gtest.h"
#include "tests/testing/logits_reference.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using testing::CompareWithReference;
using testing::LogitsDiff;
using testing::ReferenceTokens;

struct Reference {
  std::string dir;    // .../logits-exact/<model>
  std::string model;  // path of the GGUF
};

std::vector<Reference> References() {
  std::vector<Reference> refs;
  std::vector<std::pair<std::string, std::string>> roots = {
      {testing::TestDataDir() + "/logits-exact", testing::TestDataDir() + "/models"}};
  if (auto shared = testing::SharedDir()) {
    roots.insert(roots.begin(), {*shared + "/reference/logits-exact", *shared + "/models"});
  }
  std::set<std::string> seen;
  for (const auto& [ref_root, model_root] : roots) {
    if (!fs::is_directory(ref_root)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(ref_root)) {
      if (e.is_directory()) dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) {
      const std::string name = d.filename().string();
      const std::string model = model_root + "/" + name + ".gguf";
      if (!fs::exists(model) || !seen.insert(name).second) continue;
      refs.push_back({d.string(), model});
    }
  }
  return refs;
}

bool IsFloatModel(const Model& m) {
  for (const GgufTensor& t : m.file().tensors()) {
    if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) {
      return false;
    }
  }
  return true;
}

void CheckCanvas(const std::shared_ptr<const Model>& model, IsaLevel isa,
                 const std::string& json_path) {
  absl::StatusOr<Json> ref = ReadJsonFile(json_path);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::string base = json_path.substr(0, json_path.size() - 5);
  const std::vector<int32_t> tokens = ReferenceTokens(*ref);
  const int64_t L = static_cast<int64_t>(tokens.size());
  const int64_t V = model->config().n_vocab;
  ASSERT_EQ((*ref)["n_vocab"].get<int64_t>(), V);

  auto pass = ForwardPass::Create(model, static_cast<int>(L));
  ASSERT_TRUE(pass.ok()) << pass.status();
  std::vector<int32_t> rows(L);
  for (int64_t i = 0; i < L; ++i) rows[i] = static_cast<int32_t>(i);
  std::vector<float> logits(static_cast<size_t>(L * V));
  ASSERT_TRUE((*pass)->Run(tokens, rows, logits.data()).ok());

  const LogitsDiff exact = CompareWithReference(logits, L, V, *ref, base);
  const double llama_rms = (*ref)["vs_llamacpp"]["rms_diff"].get<double>();
  const std::string model_name = fs::path(base).parent_path().filename().string();
  const std::string canvas = fs::path(base).filename().string();
  std::printf("  %-20s %-10s %-13s vs exact: max %.2g rms %.2g (llama.cpp %.2g) cos %.8f top1 %d/%d",
              model_name.c_str(), IsaLevelName(isa), canvas.c_str(), exact.max_abs, exact.rms,
              llama_rms, exact.min_cosine, exact.top1_agree, exact.top1_total);
  // The second reference, llama.cpp itself: reported, not required (it
  // carries F16 flash-attention and activation-quantization error).
  const std::string llama_base = fs::path(base).parent_path().parent_path().parent_path().string() +
                                 "/logits/" + model_name + "/" + canvas;
  if (auto llama_ref = ReadJsonFile(llama_base + ".json"); llama_ref.ok()) {
    const LogitsDiff llama = CompareWithReference(logits, L, V, *llama_ref, llama_base);
    std::printf(" | vs llama.cpp: max %.2g rms %.2g cos %.6f top1 %d/%d", llama.max_abs, llama.rms,
                llama.min_cosine, llama.top1_agree, llama.top1_total);
  }
  std::printf("\n");
  if (IsFloatModel(*model)) {
    EXPECT_GE(exact.min_cosine, 0.99999);
    EXPECT_LE(exact.max_abs, 1e-3);
  } else {
    EXPECT_LE(exact.rms, 1.15 * llama_rms);
    EXPECT_EQ(exact.top1_required_fail, 0);
  }
}

TEST(ForwardTest, ReferenceModelsArePresent) {
  EXPECT_GE(References().size(), 2u);  // tests/data alone has two
}

// One test per reference model (own timeout, spread over the cores): the
// scalar path and the best one this CPU has, on every canvas.
class ExactLogitsTest : public ::testing::TestWithParam<Reference> {};

TEST_P(ExactLogitsTest, MatchesOnEveryCanvas) {
  const Reference& r = GetParam();
  for (IsaLevel isa : {IsaLevel::kScalar, BestIsaLevel()}) {
    SCOPED_TRACE(r.model + " " + IsaLevelName(isa));
    ModelOptions options;
    options.isa = isa;
    auto model = Model::Load(r.model, options);
    ASSERT_TRUE(model.ok()) << model.status();
    for (const char* canvas : {"c1_short", "c2_partial64", "c3_long200"}) {
      CheckCanvas(*model, isa, r.dir + "/" + canvas + ".json");
    }
    if (isa == BestIsaLevel()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, ExactLogitsTest, ::testing::ValuesIn(References()),
                         [](const ::testing::TestParamInfo<Reference>& info) {
                           return testing::TestNameFromPath(info.param.model);
                         });

TEST(ForwardTest, SelectedRowsEqualTheSameRowsOfAFullPass) {
  const std::string path = testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf";
  auto model = Model::Load(path, {BestIsaLevel()});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  std::vector<int32_t> tokens(70);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 977) % c.n_vocab);
  auto pass = ForwardPass::Create(*model, 70);
  ASSERT_TRUE(pass.ok());
  std::vector<int32_t> all(70);
  for (int i = 0; i < 70; ++i) all[i] = i;
  std::vector<float> full(70 * c.n_vocab);
  ASSERT_TRUE((*pass)->Run(tokens, all, full.data()).ok());
  const std::vector<int32_t> some = {0, 5, 6, 33, 69};
  std::vector<float> part(some.size() * c.n_vocab);
  ASSERT_TRUE((*pass)->Run(tokens, some, part.data()).ok());
  for (size_t r = 0; r < some.size(); ++r) {
    for (int64_t v = 0; v < c.n_vocab; ++v) {
      ASSERT_NEAR(part[r * c.n_vocab + v], full[some[r] * c.n_vocab + v], 1e-4) << some[r];
    }
  }
}

TEST(ForwardTest, RejectsBadInputAndHonoursCancel) {
  const std::string path = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  auto model = Model::Load(path, {IsaLevel::kScalar});
  ASSERT_TRUE(model.ok()) << model.status();
  auto pass = ForwardPass::Create(*model, 8);
  ASSERT_TRUE(pass.ok());
  std::vector<float> logits(8 * (*model)->config().n_vocab);
  std::vector<int32_t> tokens(8, 1);
  std::vector<int32_t> rows = {0, 1};
  EXPECT_THAT((*pass)->Run(std::vector<int32_t>(9, 1), rows, logits.data()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "exceeds the buffers"));
  tokens[3] = 1 << 20;
  EXPECT_THAT((*pass)->Run(tokens, rows, logits.data()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "token id 1048576 at position 3"));
  tokens[3] = 1;
  EXPECT_THAT((*pass)->Run(tokens, std::vector<int32_t>{1, 1}, logits.data()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "not ascending"));
  std::atomic<bool> cancel{true};
  LayerCheck check;
  check.cancel = &cancel;
  EXPECT_THAT((*pass)->Run(tokens, rows, logits.data(), &check),
              testing::StatusIs(absl::StatusCode::kCancelled, "before layer 0"));
}

}  // namespace
}  // namespace dllm
