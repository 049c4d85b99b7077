#include "service/cli/bench_command.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/base/flags.h"
#include "engine/base/process_memory.h"
#include "engine/base/stopwatch.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/cpu_topology.h"
#include "engine/parallel/read_bandwidth.h"
#include "engine/session/denoise_session.h"
#include "kernels/peak.h"
#include "service/cli/generate_command.h"
#include "service/cli/generation_flags.h"
#include "service/json/json.h"

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s) { return FailCommand("bench", s); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::StatusOr<std::vector<int>> IntList(const std::string& text, const std::string& what,
                                         int all_value) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (item == "all") {
      v = all_value;
    } else if (!absl::SimpleAtoi(item, &v) || v < 1 || v > 1 << 20) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": '", item, "' is not a positive integer"));
    }
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  return out;
}

// The measured int8 peak of one thread on `isa`'s path (ops/s).
double Int8PeakPerThread(IsaLevel isa) {
  const std::optional<PeakLoop> loop = Int8PeakLoopOf(isa);
  return loop ? ReadPeak(*loop, 0.3).measured : 0;
}

// Int8 multiply-add ops (2 per MAC) of one step's GEMMs, by the family the
// forward times them under: every layer over the whole canvas, except that
// the last layer's queries, output projection and FFN, and the head, run
// only for the `rows` the sampler reads. A MoE FFN counts the router and
// the active experts of each row.
struct GemmOps {
  double projections = 0;  // q, k, v, o
  double ffn = 0;          // gate, up, down; a MoE's router and experts
  double head = 0;         // the output projection to the vocabulary
  double total() const { return projections + ffn + head; }
};

GemmOps StepGemmOps(const ModelConfig& c, int64_t canvas, int64_t rows) {
  const double d = static_cast<double>(c.n_embd);
  GemmOps macs;
  macs.head = static_cast<double>(rows) * d * static_cast<double>(c.n_vocab);
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerConfig& layer = c.layers[l];
    const double q = static_cast<double>(layer.q_dim()), kv = static_cast<double>(layer.kv_dim());
    // The dense FFN (n_ff 0 where a layer has none), then router and experts.
    const double ffn_per_row =
        3.0 * d * static_cast<double>(layer.n_ff) +
        (layer.n_expert > 0
             ? d * static_cast<double>(layer.n_expert) +
                   3.0 * d * static_cast<double>(layer.n_ff_expert * layer.n_expert_used)
             : 0.0);
    const double kv_projections = layer.value_is_key ? 1 : 2;
    const double rest_rows = static_cast<double>(l + 1 == c.layers.size() ? rows : canvas);
    macs.projections +=
        static_cast<double>(canvas) * d * kv_projections * kv + rest_rows * (d * q + q * d);
    macs.ffn += rest_rows * ffn_per_row;
  }
  return {2 * macs.projections, 2 * macs.ffn, 2 * macs.head};
}

}  // namespace

constexpr char kBenchUsage[] =
    "usage: dllm bench --model M [--threads 1,2,all] [--gen-lengths 128,256,512]\n"
    "         [--prompt-len 16] [--block-length 32] [--steps 5] [--warmup 1]\n"
    "         [--cache none|prefix|dual] [--cache-refresh R] [--threshold TAU] [--alg A]\n"
    "         [--isa auto|...] [--out FILE.json] [--git-sha SHA] [--label TEXT]\n"
    "  end-to-end ms per denoising step, tokens/s and peak RSS on a model file;\n"
    "  --steps 0 runs each generation to its end (every step measured), which is\n"
    "  what a cache's or threshold's whole-request tokens/s needs\n";

namespace {

// The machine a result was measured on.
Json MachineJson(const CpuTopology& topo, IsaLevel isa) {
  const CpuFeatures& cpu = GetCpuFeatures();
  Json machine = Json::object();
  machine["cpu"] = cpu.brand;
  machine["flags"] = CpuFlagsString(cpu);
  machine["logical_cpus"] = static_cast<int64_t>(topo.usable_cpus.size());
  machine["physical_cores"] = topo.physical_cores;
  machine["isa"] = IsaLevelName(isa);
  return machine;
}

// The model a result was measured with, and what loading it cost.
Json ModelJson(const std::string& file, const Model& model, double load_seconds,
               const ProcessMemory& after_load, uint64_t weight_bytes) {
  const ModelConfig& c = model.config();
  Json m = Json::object();
  // The name only: a result file is committed, and where the model lay on
  // the machine that measured it identifies nothing (file_bytes does).
  m["file"] = std::filesystem::path(file).filename().string();
  m["arch"] = std::string(ArchName(c.arch));
  m["name"] = c.name;
  m["file_bytes"] = static_cast<int64_t>(model.file().file_size());
  m["weight_bytes"] = static_cast<int64_t>(weight_bytes);
  m["n_layer"] = c.n_layer;
  m["n_embd"] = c.n_embd;
  m["n_ff"] = c.n_ff;
  m["n_vocab"] = c.n_vocab;
  m["load_seconds"] = load_seconds;
  m["rss_after_load_bytes"] = static_cast<int64_t>(after_load.rss_bytes);
  return m;
}

// What the measured steps of one run took.
struct StepSamples {
  std::vector<double> step_ms, forward_ms, sample_ms;
  std::vector<double> full_ms, cached_ms;  // under a cache: steps that refilled / read it
  std::vector<double> rows;                // canvas rows each step's forward computed
  ForwardStats ops;
  int64_t committed = 0;
  int forward_steps = 0;  // measured steps that ran a forward
  double measured_seconds = 0;
};

// Runs `warmup` steps unmeasured, then up to `measured` measured ones (fewer
// when the generation ends first; 0: all the rest).
absl::StatusOr<StepSamples> MeasureSteps(DenoiseSession& session, tbb::task_arena& arena,
                                         int warmup, int measured) {
  StepSamples out;
  for (int s = 0; (measured == 0 || s < warmup + measured) && !session.done(); ++s) {
    absl::StatusOr<StepReport> step;
    arena.execute([&] { step = session.Advance(); });
    if (!step.ok()) return step.status();
    if (s < warmup) continue;
    out.step_ms.push_back(step->step_seconds * 1e3);
    out.forward_ms.push_back(step->forward_seconds * 1e3);
    out.sample_ms.push_back(step->sample_seconds * 1e3);
    out.committed += static_cast<int64_t>(step->positions.size());
    out.measured_seconds += step->step_seconds;
    out.ops += step->forward;
    if (step->forward_passes > 0) {
      ++out.forward_steps;
      out.rows.push_back(static_cast<double>(step->rows_computed));
    }
    if (step->cache_use == CacheUse::kRefill) out.full_ms.push_back(step->step_seconds * 1e3);
    if (step->cache_use == CacheUse::kRead) out.cached_ms.push_back(step->step_seconds * 1e3);
  }
  return out;
}

// Milliseconds per step of each part of the forward pass, over `n` steps.
Json OpSplitJson(const ForwardStats& ops, double n) {
  Json split = Json::object();
  for (const ForwardOp& op : kForwardOps) split[op.name] = ops.*op.seconds * 1e3 / n;
  return split;
}

// Each GEMM family of a step: its int8 ops, its time per step (the op the
// forward times it under: projections include bias, RoPE and the K/V
// writes, the FFN its activation and a MoE's routing), its share of the
// median step, and the fraction of the int8 peak its GEMMs reached.
Json GemmJson(const GemmOps& gemm, const ForwardStats& ops, double n, double median_ms,
              double peak) {
  Json out = Json::object();
  const std::pair<const char*, std::pair<double, double>> families[] = {
      {"projections", {gemm.projections, ops.projections}},
      {"ffn", {gemm.ffn, ops.ffn}},
      {"head", {gemm.head, ops.head}}};
  for (const auto& [name, f] : families) {
    const double ms = f.second * 1e3 / n;
    out[name] = {{"int8_ops", f.first},
                 {"ms_per_step", ms},
                 {"share_of_step", ms / median_ms},
                 {"fraction_of_peak", ms > 0 && peak > 0 ? f.first / (ms * 1e-3 * peak) : 0.0}};
  }
  return out;
}

// One run's record: medians, the op split, and the efficiency against the
// larger of the bandwidth and int8 compute floors.
Json RunJson(const ModelConfig& c, const SamplerConfig& sc, const CachingOptions& caching,
             int threads, int64_t prompt_len, const StepSamples& samples, double bandwidth,
             uint64_t weight_bytes, double peak_per_thread) {
  const std::vector<double>& step_ms = samples.step_ms;
  const double n = static_cast<double>(step_ms.size());
  const int gen = sc.gen_length;
  const double median = Median(step_ms);
  Json run = Json::object();
  run["threads"] = threads;
  run["prompt_len"] = prompt_len;
  run["gen_length"] = gen;
  run["canvas"] = prompt_len + gen;
  run["block_length"] = sc.EffectiveBlockLength();
  run["steps_measured"] = static_cast<int64_t>(step_ms.size());
  run["ms_per_step_median"] = median;
  run["ms_per_step_min"] = *std::min_element(step_ms.begin(), step_ms.end());
  run["ms_per_step_max"] = *std::max_element(step_ms.begin(), step_ms.end());
  run["forward_ms_median"] = Median(samples.forward_ms);
  run["sampling_ms_median"] = Median(samples.sample_ms);
  run["tokens_per_second"] =
      samples.measured_seconds > 0 ? samples.committed / samples.measured_seconds : 0.0;
  run["cache"] = std::string(CacheModeName(caching.cache));
  run["cache_refresh"] = caching.cache_refresh_steps;
  run["threshold"] = sc.threshold ? Json(*sc.threshold) : Json(nullptr);
  run["algorithm"] = std::string(AlgorithmName(sc.algorithm));
  run["forward_steps"] = samples.forward_steps;
  run["rows_per_step_median"] = Median(samples.rows);
  run["committed"] = samples.committed;
  if (caching.cache != CacheMode::kNone) {
    run["cache_refreshes"] = static_cast<int64_t>(samples.full_ms.size());
    run["full_step_ms_median"] = Median(samples.full_ms);
    run["cached_step_ms_median"] = Median(samples.cached_ms);
  }
  run["op_ms_per_step"] = OpSplitJson(samples.ops, n);
  run["peak_rss_bytes"] = static_cast<int64_t>(ReadProcessMemory().peak_rss_bytes);
  run["read_bandwidth_bytes_per_s"] = bandwidth;
  const double floor_ms = weight_bytes / bandwidth * 1e3;
  // Rows the sampler reads per step: a LLaDA block, or every masked
  // position of a Dream canvas.
  const int64_t rows = sc.family == SamplerFamily::kLlada ? sc.EffectiveBlockLength() : gen;
  // Under a cache most steps compute fewer rows than the canvas: the floor
  // is for the median step's rows.
  const int64_t computed =
      samples.rows.empty() ? prompt_len + gen : static_cast<int64_t>(Median(samples.rows));
  const GemmOps gemm = StepGemmOps(c, computed, std::min(rows, computed));
  const double step_ops = gemm.total();
  const double compute_floor_ms =
      peak_per_thread > 0 ? step_ops / (peak_per_thread * threads) * 1e3 : 0;
  run["bandwidth_floor_ms"] = floor_ms;
  run["int8_ops_per_step"] = step_ops;
  run["int8_peak_ops_per_s"] = peak_per_thread * threads;
  run["compute_floor_ms"] = compute_floor_ms;
  run["efficiency_vs_bandwidth_floor"] = floor_ms / median;
  run["efficiency"] = std::max(floor_ms, compute_floor_ms) / median;
  run["gemm"] = GemmJson(gemm, samples.ops, n, median, peak_per_thread * threads);
  return run;
}

// Now as ISO 8601 UTC ("2026-12-05T14:05:00Z").
std::string UtcNow() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

// One measured configuration: threads, generation length and the flags'
// settings, with the machine's limits to judge it against.
struct BenchPoint {
  int threads = 1;
  int gen = 0;
  int block = 0;
  int warmup = 0;
  int measured = 0;
  double bandwidth = 0;  // the read bandwidth at `threads`
  uint64_t weight_bytes = 0;
  double peak_per_thread = 0;
};

// The two lines of a run on stderr.
void PrintRun(const Json& run, const BenchPoint& p, const CachingOptions& caching) {
  std::fprintf(stderr,
               "%d threads, gen %d (canvas %lld, cache %s): %.1f ms/step median [%.1f, %.1f], "
               "forward %.1f, sampling %.1f, %.3g tok/s; floors: bandwidth %.1f ms, int8 "
               "compute %.1f ms; efficiency %.0f%%\n",
               p.threads, p.gen, static_cast<long long>(run["canvas"].get<int64_t>()),
               std::string(CacheModeName(caching.cache)).c_str(),
               run["ms_per_step_median"].get<double>(), run["ms_per_step_min"].get<double>(),
               run["ms_per_step_max"].get<double>(), run["forward_ms_median"].get<double>(),
               run["sampling_ms_median"].get<double>(), run["tokens_per_second"].get<double>(),
               run["bandwidth_floor_ms"].get<double>(), run["compute_floor_ms"].get<double>(),
               100 * run["efficiency"].get<double>());
  const Json& ops = run["op_ms_per_step"];
  std::fprintf(stderr,
               "  per step: FFN %.1f ms, q/k/v/o %.1f, attention %.1f, head %.1f, norms and "
               "embedding %.1f\n",
               ops["ffn"].get<double>(), ops["projections"].get<double>(),
               ops["attention"].get<double>(), ops["head"].get<double>(),
               ops["norm"].get<double>() + ops["embed"].get<double>());
  const Json& g = run["gemm"];
  const auto family = [&](const char* name) {
    return absl::StrFormat("%.0f%% of the step at %.0f%% of peak",
                           100 * g[name]["share_of_step"].get<double>(),
                           100 * g[name]["fraction_of_peak"].get<double>());
  };
  std::fprintf(stderr, "  GEMMs: q/k/v/o %s; FFN %s; head %s\n", family("projections").c_str(),
               family("ffn").c_str(), family("head").c_str());
}

// The sampler of one point: the model's defaults at `gen`, the flags' block
// length, algorithm and threshold, no early exit (every step is measured).
absl::StatusOr<SamplerConfig> BenchSampler(const ParsedFlags& flags, const ModelConfig& c,
                                           const BenchPoint& p) {
  SamplerConfig sc = DefaultSamplerConfig(c, p.gen);
  sc.block_length = DefaultBlockLength(sc.family, p.gen, p.block);
  sc.early_exit = false;
  if (flags.Has("alg")) {
    DLLM_ASSIGN_OR_RETURN(sc.algorithm, ParseAlgorithm(flags.Get("alg")));
  }
  if (flags.Has("threshold")) {
    DLLM_ASSIGN_OR_RETURN(const double tau, flags.GetDouble("threshold", 0.0));
    sc.threshold = static_cast<float>(tau);
  }
  DLLM_RETURN_IF_ERROR(sc.Validate());
  return sc;
}

// Steps of one point, measured after the warm-up.
absl::StatusOr<Json> MeasureRun(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
                                const std::vector<int32_t>& prompt, const BenchPoint& p) {
  DLLM_ASSIGN_OR_RETURN(const SamplerConfig sc, BenchSampler(flags, model->config(), p));
  DLLM_ASSIGN_OR_RETURN(const CachingOptions caching, CachingOptionsFromFlags(flags, *model));
  tbb::task_arena arena(p.threads);
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session;
  arena.execute([&] { session = DenoiseSession::Create(model, sc, prompt, caching); });
  if (!session.ok()) return session.status();
  DLLM_ASSIGN_OR_RETURN(const StepSamples samples,
                        MeasureSteps(**session, arena, p.warmup, p.measured));
  if (samples.step_ms.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gen-lengths ", p.gen, ": the run finished within the ", p.warmup,
        " warm-up steps, so no step was measured (lower --warmup or raise the length)"));
  }
  Json run = RunJson(model->config(), sc, caching, p.threads, static_cast<int64_t>(prompt.size()),
                     samples, p.bandwidth, p.weight_bytes, p.peak_per_thread);
  PrintRun(run, p, caching);
  return run;
}

// The result document to --out, else to stdout.
absl::Status WriteResult(const ParsedFlags& flags, const Json& result) {
  const std::string text = DumpJson(result, 1) + "\n";
  if (!flags.Has("out")) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return absl::OkStatus();
  }
  std::ofstream out(flags.Get("out"), std::ios::trunc);
  out << text;
  if (!out) return absl::PermissionDeniedError(flags.Get("out") + ": cannot write");
  return absl::OkStatus();
}

}  // namespace

int RunBench(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      argc, argv,
      {"model", "threads", "gen-lengths", "prompt-len", "block-length", "steps", "warmup", "isa",
       "out", "git-sha", "label", "cache", "cache-refresh", "threshold", "alg"},
      {});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kBenchUsage);
  if (!flags->Has("model") || !flags->positional.empty()) {
    std::fputs(kBenchUsage, stderr);
    return 2;
  }
  const CpuTopology topo = ReadCpuTopology();
  absl::StatusOr<std::vector<int>> threads =
      IntList(flags->Get("threads", "1,2,all"), "--threads", topo.UsableThreads());
  if (!threads.ok()) return Fail(threads.status());
  absl::StatusOr<std::vector<int>> gens =
      IntList(flags->Get("gen-lengths", "128,256,512"), "--gen-lengths", 0);
  if (!gens.ok()) return Fail(gens.status());
  absl::StatusOr<int64_t> prompt_len = flags->GetInt("prompt-len", 16);
  absl::StatusOr<int64_t> block = flags->GetInt("block-length", kDefaultBlockLength);
  absl::StatusOr<int64_t> measured = flags->GetInt("steps", 5);
  absl::StatusOr<int64_t> warmup = flags->GetInt("warmup", 1);
  for (const absl::Status& s :
       {prompt_len.status(), block.status(), measured.status(), warmup.status()}) {
    if (!s.ok()) return Fail(s);
  }
  absl::StatusOr<IsaLevel> isa = ResolveIsaLevel(flags->Get("isa"));
  if (!isa.ok()) return Fail(isa.status());

  // Machine limits first: the bandwidth buffer is freed before the model
  // loads, so it never shows in the peak RSS reported below.
  std::map<int, double> bandwidth_by_threads;
  for (int t : *threads) bandwidth_by_threads[t] = MeasureReadBandwidth(t);

  const Stopwatch load_time;
  ModelOptions model_options;
  model_options.isa = *isa;
  absl::StatusOr<std::shared_ptr<const Model>> model =
      Model::Load(flags->Get("model"), model_options);
  if (!model.ok()) return Fail(model.status());
  const double load_seconds = load_time.ElapsedSeconds();
  const ProcessMemory after_load = ReadProcessMemory();
  uint64_t weight_bytes = 0;
  for (const GgufTensor& t : (*model)->file().tensors()) weight_bytes += t.n_bytes;

  Json result = Json::object();
  result["schema"] = "dllm-bench-e2e/1";
  result["date"] = UtcNow();
  result["git_sha"] = flags->Get("git-sha", "unknown");
  result["label"] = flags->Get("label", "");
  result["machine"] = MachineJson(topo, *isa);
  result["model"] = ModelJson(flags->Get("model"), **model, load_seconds, after_load, weight_bytes);

  Json runs = Json::array();
  std::vector<int32_t> prompt(static_cast<size_t>(*prompt_len));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(65 + i % 26);
  const double peak_per_thread = Int8PeakPerThread(*isa);
  for (int t : *threads) {
    for (int gen : *gens) {
      BenchPoint point{t,
                       gen,
                       static_cast<int>(*block),
                       static_cast<int>(*warmup),
                       static_cast<int>(*measured),
                       bandwidth_by_threads[t],
                       weight_bytes,
                       peak_per_thread};
      absl::StatusOr<Json> run = MeasureRun(*flags, *model, prompt, point);
      if (!run.ok()) return Fail(run.status());
      runs.push_back(*std::move(run));
    }
  }
  result["runs"] = runs;
  if (absl::Status s = WriteResult(*flags, result); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace dllm
