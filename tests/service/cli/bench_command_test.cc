// `dllm synth` + `dllm bench` on tiny shapes: the short-running subset of the
// end-to-end suite (scripts/bench-e2e), so the runner and its result file
// keep working. Checks the file's structure and the relations between its
// figures, never how fast anything is.
#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::RunDllm;
using testing::RunResult;

// Writes a tiny random-weight model of `arch` and returns its path.
std::string SynthTiny(const std::string& arch) {
  const std::string path = testing::TempDir() + "/" + arch + "-tiny.gguf";
  const RunResult r =
      RunDllm("synth --arch " + arch + " --shape tiny --type q4_k_m --seed 3 --out " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

class BenchCommandTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchCommandTest, WritesAResultFileWhoseFiguresAgree) {
  const std::string arch = GetParam();
  const std::string model = SynthTiny(arch);
  const std::string out = testing::TempDir() + "/result.json";
  const RunResult r = RunDllm("bench --model " + model +
                              " --threads 1,2 --gen-lengths 16,32 --steps 3 --warmup 1"
                              " --git-sha abc1234 --label 'tiny test' --out " +
                              out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto result = ReadJsonFile(out);
  ASSERT_TRUE(result.ok()) << result.status();
  const Json& j = *result;
  EXPECT_EQ(j["schema"].get<std::string>(), "dllm-bench-e2e/1");
  EXPECT_EQ(j["git_sha"].get<std::string>(), "abc1234");
  EXPECT_EQ(j["label"].get<std::string>(), "tiny test");
  EXPECT_FALSE(j["machine"]["isa"].get<std::string>().empty());
  EXPECT_GE(j["machine"]["logical_cpus"].get<int64_t>(), 1);

  const Json& m = j["model"];
  EXPECT_EQ(m["arch"].get<std::string>(), arch);
  EXPECT_EQ(m["file_bytes"].get<int64_t>(),
            static_cast<int64_t>(std::filesystem::file_size(model)));
  EXPECT_GT(m["weight_bytes"].get<int64_t>(), 0);
  EXPECT_LT(m["weight_bytes"].get<int64_t>(), m["file_bytes"].get<int64_t>());
  EXPECT_GT(m["load_seconds"].get<double>(), 0);

  // One run per (threads, gen length), in that order.
  const auto& runs = j["runs"];
  ASSERT_EQ(runs.size(), 4u);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Json& run = runs[i];
    SCOPED_TRACE("run " + std::to_string(i));
    const int64_t threads = run["threads"].get<int64_t>(), gen = run["gen_length"].get<int64_t>();
    EXPECT_EQ(threads, i < 2 ? 1 : 2);
    EXPECT_EQ(gen, i % 2 == 0 ? 16 : 32);
    seen.insert({threads, gen});
    EXPECT_EQ(run["prompt_len"].get<int64_t>(), 16);
    EXPECT_EQ(run["canvas"].get<int64_t>(), 16 + gen);
    EXPECT_EQ(run["steps_measured"].get<int64_t>(), 3);

    const double median = run["ms_per_step_median"].get<double>();
    EXPECT_GT(median, 0);
    EXPECT_LE(run["ms_per_step_min"].get<double>(), median);
    EXPECT_GE(run["ms_per_step_max"].get<double>(), median);
    // A step is a forward plus sampling; the medians of the parts cannot
    // exceed the slowest whole step.
    EXPECT_GT(run["forward_ms_median"].get<double>(), 0);
    EXPECT_LE(run["forward_ms_median"].get<double>(), run["ms_per_step_max"].get<double>());
    EXPECT_LE(run["sampling_ms_median"].get<double>(), run["ms_per_step_max"].get<double>());
    double split = 0;
    for (const char* part : {"embed", "norm", "attention", "projections", "ffn", "head"}) {
      const double ms = run["op_ms_per_step"][part].get<double>();
      EXPECT_GE(ms, 0) << part;
      split += ms;
    }
    // The per-operation split is a mean over the same steps, inside the forward.
    EXPECT_GT(split, 0);
    EXPECT_LE(split, 1.05 * run["ms_per_step_max"].get<double>());
    EXPECT_GT(run["tokens_per_second"].get<double>(), 0);
    EXPECT_GE(run["peak_rss_bytes"].get<int64_t>(), m["rss_after_load_bytes"].get<int64_t>());

    // Floors and efficiency follow from the recorded figures.
    const double bandwidth = run["read_bandwidth_bytes_per_s"].get<double>();
    ASSERT_GT(bandwidth, 1e8);
    EXPECT_NEAR(run["bandwidth_floor_ms"].get<double>(),
                m["weight_bytes"].get<int64_t>() / bandwidth * 1e3,
                1e-6 * run["bandwidth_floor_ms"].get<double>());
    const double peak = run["int8_peak_ops_per_s"].get<double>();
    const double ops = run["int8_ops_per_step"].get<double>();
    EXPECT_GT(ops, 0);
    const double compute_floor = run["compute_floor_ms"].get<double>();
    if (peak > 0) {
      EXPECT_NEAR(compute_floor, ops / peak * 1e3, 1e-6 * compute_floor);
    }
    const double efficiency = run["efficiency"].get<double>();
    EXPECT_NEAR(efficiency,
                std::max(run["bandwidth_floor_ms"].get<double>(), compute_floor) / median,
                1e-9 + 1e-6 * efficiency);
    // Each GEMM family: its ops add up to the step's, its time is the op
    // split's, and its share and fraction of peak follow from those.
    const Json& gemm = run["gemm"];
    double family_ops = 0;
    for (const char* family : {"projections", "ffn", "head"}) {
      SCOPED_TRACE(family);
      const Json& f = gemm[family];
      const double f_ops = f["int8_ops"].get<double>();
      const double f_ms = f["ms_per_step"].get<double>();
      family_ops += f_ops;
      EXPECT_GT(f_ops, 0);
      EXPECT_NEAR(f_ms, run["op_ms_per_step"][family].get<double>(), 1e-9 + 1e-9 * f_ms);
      EXPECT_NEAR(f["share_of_step"].get<double>(), f_ms / median, 1e-9);
      if (peak > 0 && f_ms > 0) {
        EXPECT_NEAR(f["fraction_of_peak"].get<double>(), f_ops / (f_ms * 1e-3 * peak),
                    1e-9 * f["fraction_of_peak"].get<double>());
      }
    }
    EXPECT_NEAR(family_ops, ops, 1e-9 * ops);
    // The head and the dense FFN, counted from the model's shape: every
    // layer's FFN over the canvas but the last one's, which (as the head)
    // runs only for the rows the sampler reads (a LLaDA block, a Dream
    // generation).
    const double d = m["n_embd"].get<double>(), ff = m["n_ff"].get<double>();
    const double canvas = run["canvas"].get<double>();
    const double read = std::min(canvas, arch == "llada" ? run["block_length"].get<double>()
                                                         : run["gen_length"].get<double>());
    EXPECT_DOUBLE_EQ(gemm["head"]["int8_ops"].get<double>(),
                     2 * read * d * m["n_vocab"].get<double>());
    EXPECT_DOUBLE_EQ(gemm["ffn"]["int8_ops"].get<double>(),
                     2 * 3 * d * ff * ((m["n_layer"].get<double>() - 1) * canvas + read));
  }
  EXPECT_EQ(seen.size(), 4u);
  // More canvas, more work per step.
  EXPECT_GT(runs[1]["int8_ops_per_step"].get<double>(), runs[0]["int8_ops_per_step"].get<double>());
  EXPECT_EQ(runs[0]["int8_ops_per_step"].get<double>(), runs[2]["int8_ops_per_step"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Arch, BenchCommandTest, ::testing::Values("llada", "dream"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(BenchCommandErrorsTest, BadFlagsGetOneLineNamingTheProblem) {
  const std::string model = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--model " + model + " --threads 0", "--threads: '0' is not a positive integer"},
      {"--model " + model + " --gen-lengths 16,x", "--gen-lengths: 'x' is not a positive integer"},
      {"--model " + model + " --threads 1 --gen-lengths 1 --warmup 1",
       "--gen-lengths 1: the run finished within the 1 warm-up steps"},
      {"--model /nonexistent/model.gguf --threads 1", "/nonexistent/model.gguf"},
      {"--model " + model + " --no-such-flag 1", "no-such-flag"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const RunResult r = RunDllm("bench " + c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(r.signaled);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace dllm
