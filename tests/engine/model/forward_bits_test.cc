// The forward pass, one sequence and no cache, against recorded logits bits
// (tests/data/forward-bits: FNV-1a hashes of the raw float32 logits; the
// README says which commit wrote each path's), on every ISA path this CPU
// has and the file has an entry for.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/forward.h"
#include "engine/synth/synthetic_model.h"
#include "gtest/gtest.h"
#include "service/cli/file_digest.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::string Fnv1a(const std::vector<float>& values) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

// The paths the file names, as dllm's --isa spells them.
const std::pair<const char*, IsaLevel> kPaths[] = {
    {"scalar", IsaLevel::kScalar}, {"avx2", IsaLevel::kAvx2}, {"avx512", IsaLevel::kAvx512Vnni}};

// The MoE file the hashes were made from: `dllm synth --arch llada-moe
// --shape tiny --type q4_k_m --seed 1`, checked by its sha256.
std::string MoeModel() {
  const std::string path = testing::TempDir() + "/forward-bits-moe1.gguf";
  absl::StatusOr<SyntheticShape> shape = SyntheticShapeFor(Arch::kLladaMoe, "tiny");
  EXPECT_TRUE(shape.ok()) << shape.status();
  EXPECT_TRUE(
      WriteSyntheticModel(Arch::kLladaMoe, *shape, QuantPreset::kQ4_K_M, /*seed=*/1, path).ok());
  absl::StatusOr<std::string> sha = Sha256File(path);
  EXPECT_TRUE(sha.ok());
  EXPECT_EQ(*sha, "a5c46050a2ab54c8394a40801fd95b36fb5b11ec1d908910e8f3e84ed7c4a9b8")
      << "dllm synth no longer writes the file the hashes were made from";
  return path;
}

TEST(ForwardBitsTest, OneSequenceWithoutACacheKeepsTheRecordedBits) {
#ifndef DLLM_RELEASE_FLOAT_CODE
  GTEST_SKIP() << "the hashes are of the Release build's float code (tests/CMakeLists.txt)";
#endif
  absl::StatusOr<Json> hashes = ReadJsonFile(testing::TestDataDir() + "/forward-bits/fnv1a.json");
  ASSERT_TRUE(hashes.ok()) << hashes.status();
  std::vector<int32_t> tokens(70);
  for (int i = 0; i < 70; ++i) tokens[i] = (977 * i + 13) % 2000;
  std::vector<int32_t> all(70);
  for (int i = 0; i < 70; ++i) all[i] = i;
  const std::vector<int32_t> some = {0, 5, 6, 33, 69};
  int checked = 0;
  for (const auto& [name, by_path] : hashes->items()) {
    const std::string path =
        name == "moe1" ? MoeModel() : testing::TestDataDir() + "/models/" + name + ".gguf";
    for (const auto& [isa_name, isa] : kPaths) {
      if (!IsaLevelSupported(isa) || !by_path.contains(isa_name)) continue;
      SCOPED_TRACE(name + " " + isa_name);
      auto model = Model::Load(path, {isa});
      ASSERT_TRUE(model.ok()) << model.status();
      auto pass = ForwardPass::Create(*model, 70);
      ASSERT_TRUE(pass.ok()) << pass.status();
      const size_t v = static_cast<size_t>((*model)->config().n_vocab);
      for (const auto& [kind, rows] : {std::pair{"all", all}, {"some", some}}) {
        std::vector<float> logits(rows.size() * v);
        ASSERT_TRUE((*pass)->Run(tokens, rows, logits.data()).ok());
        EXPECT_EQ(Fnv1a(logits), by_path[isa_name][kind].get<std::string>()) << kind;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 10);  // at least the scalar path of every model
}

}  // namespace
}  // namespace dllm
