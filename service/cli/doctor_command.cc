#include "service/cli/doctor_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/base/flags.h"
#include "engine/base/utf8.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "engine/parallel/cpu_topology.h"
#include "kernels/cpu_features.h"
#include "kernels/peak.h"

namespace dllm {
namespace {

enum class Level { kOk, kWarn, kFail };

struct Check {
  Level level;
  std::string what;
  std::string advice;  // what to do; empty when nothing
};

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / 1073741824.0); }

// One core's measured peak of every loop this machine runs, beside the
// documented bound (kernels/peak.h): the denominators `dllm bench` and the
// kernel benchmark divide by. A peak above its bound means a wrong table.
void PeakChecks(std::vector<Check>* out) {
  for (PeakLoop loop : SupportedPeakLoops()) {
    const PeakReading r = ReadPeak(loop, 0.15);
    const PeakSpec& spec = PeakSpecOf(loop);
    const std::string what = absl::StrFormat(
        "peak %s (%s): %.0f G ops/s per core; bound %.0f G (%g/cycle x %g ops x %.2f GHz "
        "measured), %.0f%%",
        spec.name, spec.instruction, r.measured / 1e9, r.bound / 1e9, spec.instructions_per_cycle,
        spec.ops_per_instruction, r.clock_hz / 1e9, 100 * r.ratio());
    out->push_back(
        {r.exceeds_bound() ? Level::kWarn : Level::kOk, what,
         r.exceeds_bound() ? "the loop or the documented bound is wrong: report it" : ""});
  }
}

void CpuChecks(std::vector<Check>* out) {
  const CpuFeatures& f = GetCpuFeatures();
  out->push_back({Level::kOk, absl::StrCat("cpu: ", f.brand.empty() ? f.vendor : f.brand), ""});
  if (!IsaLevelSupported(IsaLevel::kAvx2)) {
    out->push_back({Level::kWarn, "no AVX2/FMA/F16C: only the scalar kernels can run",
                    "expect steps far slower than on any x86-64 CPU from 2013 on"});
  } else {
    out->push_back({Level::kOk, "avx2: yes", ""});
  }
  out->push_back(
      {IsaLevelSupported(IsaLevel::kAvx512Vnni) ? Level::kOk : Level::kWarn,
       absl::StrCat("avx512-vnni: ", IsaLevelSupported(IsaLevel::kAvx512Vnni) ? "yes" : "no"),
       IsaLevelSupported(IsaLevel::kAvx512Vnni)
           ? ""
           : "int8 GEMM falls back to AVX2 (about half the throughput)"});
  if (f.amx_tile && f.amx_int8) {
    if (f.amx_permitted) {
      out->push_back({Level::kOk, "amx-int8: yes, tile data granted by the kernel", ""});
    } else {
      out->push_back({Level::kWarn,
                      absl::StrCat("amx-int8: present but unusable: ", f.amx_denied_reason),
                      "use Linux >= 5.16 with AMX enabled; AVX512-VNNI is used meanwhile"});
    }
  } else {
    out->push_back({Level::kOk, "amx-int8: not on this CPU", ""});
  }
  out->push_back({Level::kOk, absl::StrCat("kernel path: ", IsaLevelName(BestIsaLevel())), ""});
  PeakChecks(out);

  const CpuTopology topo = ReadCpuTopology();
  std::string cores = absl::StrCat("cores: ", topo.usable_cpus.size(), " logical, ",
                                   topo.physical_cores, " physical usable");
  if (topo.hybrid()) {
    absl::StrAppend(&cores, "; hybrid: ", topo.performance_cpus.size(), " performance + ",
                    topo.efficiency_cpus.size(), " efficiency logical CPUs");
  } else {
    absl::StrAppend(&cores, "; one core type");
  }
  if (topo.cgroup_cpu_quota) {
    absl::StrAppend(&cores, absl::StrFormat("; cgroup quota %.2f CPUs", *topo.cgroup_cpu_quota));
  }
  absl::StrAppend(&cores, "; threads to use: ", topo.UsableThreads());
  out->push_back({Level::kOk, cores, ""});
}

void ModelChecks(const std::string& path, std::vector<Check>* out) {
  absl::StatusOr<GgufFile> file = GgufFile::Open(path);
  if (!file.ok()) {
    out->push_back({Level::kFail, absl::StrCat("model: ", file.status().message()),
                    "check the path, or re-download the file (it may be truncated)"});
    return;
  }
  // The loader's own checks (ReadModelSpec): what passes here, Model::Load
  // and dllm-server accept.
  absl::StatusOr<ModelSpec> spec = ReadModelSpec(*file);
  if (!spec.ok()) {
    out->push_back(
        {Level::kFail,
         absl::StrCat("model: the loader refuses it: ", PrintableText(spec.status().message())),
         absl::StrCat("dllm runs llama.cpp-format GGUF files of ", SupportedArchNames(),
                      " (convert_hf_to_gguf.py), quantized to Q4_K_M, Q5_K_M, Q6_K, "
                      "Q8_0, Q4_0, F16, BF16 or F32")});
    return;
  }
  const ModelConfig& config = spec->config;
  std::string facts =
      absl::StrCat("model: ", ArchName(config.arch), ", ", config.n_layer, " layers, d ",
                   config.n_embd, ", vocab ", config.n_vocab, ", mask token ", config.tokens.mask,
                   ", tokenizer ", config.tokenizer_model, "/", config.tokenizer_pre);
  if (config.moe()) {
    absl::StrAppend(&facts, ", ", config.n_expert_used, " of ", config.n_expert, " experts");
  }
  out->push_back({Level::kOk, facts, ""});
  out->push_back({Level::kOk,
                  "model: the loader accepts it (architecture, every tensor's type and shape, "
                  "tokenizer, special tokens)",
                  ""});
  const MemoryInfo mem = ReadMemoryInfo();
  uint64_t available = mem.available_bytes;
  if (mem.cgroup_limit_bytes && *mem.cgroup_limit_bytes < available) {
    available = *mem.cgroup_limit_bytes;
  }
  // One copy of the weights plus headroom for activations and the server.
  const uint64_t need = file->file_size() + file->file_size() / 10 + (256u << 20);
  const std::string line =
      absl::StrCat("memory: ", Gib(available), " available, model needs about ", Gib(need));
  if (available < need) {
    out->push_back({Level::kFail, line,
                    "free memory, raise the container limit, or use a smaller "
                    "quantization"});
  } else {
    out->push_back({Level::kOk, line, ""});
  }
}

}  // namespace

constexpr char kDoctorUsage[] =
    "usage: dllm doctor [MODEL.gguf]\n"
    "  checks this machine (CPU features, AMX permission, cores, memory) and, with a model,\n"
    "  whether the loader accepts it and it fits in memory; exit 1 when not ready\n";

int RunDoctor(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv, {}, {});
  if (!flags.ok()) return FailCommand("doctor", flags.status());
  if (flags->help) return PrintHelp(kDoctorUsage);
  if (flags->positional.size() > 1) {
    std::fputs(kDoctorUsage, stderr);
    return 2;
  }
  std::vector<Check> checks;
  CpuChecks(&checks);
  if (flags->positional.size() == 1) ModelChecks(flags->positional[0], &checks);

  int fails = 0, warns = 0;
  for (const Check& c : checks) {
    const char* tag = c.level == Level::kOk ? "ok  " : c.level == Level::kWarn ? "warn" : "FAIL";
    std::printf("[%s] %s\n", tag, c.what.c_str());
    if (!c.advice.empty()) std::printf("       -> %s\n", c.advice.c_str());
    fails += c.level == Level::kFail;
    warns += c.level == Level::kWarn;
  }
  if (fails > 0) {
    std::printf("verdict: NOT READY (%d problem%s to fix)\n", fails, fails == 1 ? "" : "s");
    return 1;
  }
  std::printf(
      "verdict: ready%s\n",
      warns ? absl::StrCat(" (", warns, " warning", warns == 1 ? "" : "s", ")").c_str() : "");
  return 0;
}

}  // namespace dllm
