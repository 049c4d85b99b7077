#include "service/cli/synth_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/base/stopwatch.h"
#include "engine/synth/synthetic_model.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) { return FailCommand("synth", s); }

constexpr char kSynthUsage[] =
    "usage: dllm synth --arch llada|dream|llada-moe|rnd1 [--shape SHAPE]\n"
    "                  [--type q4_k_m|q5_k_m|q6_k|q8_0|q4_0|f16|f32] [--seed S] --out FILE\n"
    "  SHAPE: the real model's (llada 8b, dream 7b, llada-moe 7b-a1b, rnd1 30b-a3b,\n"
    "         llada2 mini; the\n"
    "         default), 1b (dense), tiny, or custom:d=,l=,h=,kv=,ff=,v=[,hd=,e=,eu=,fe=]\n";

// The shape of the checkpoint each architecture stands for.
const char* RealShapeName(Arch arch) {
  switch (arch) {
    case Arch::kLlada:
      return "8b";
    case Arch::kDream:
      return "7b";
    case Arch::kLladaMoe:
      return "7b-a1b";
    case Arch::kRnd1:
      return "30b-a3b";
    case Arch::kDiffusionGemma:
      break;
    case Arch::kLlada2:
      return "mini";
  }
  return "tiny";
}

}  // namespace

int RunSynth(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, {"arch", "shape", "type", "seed", "out"}, {"quiet"});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kSynthUsage);
  if (!flags->Has("arch") || !flags->Has("out") || !flags->positional.empty()) {
    std::fprintf(stderr, "%s", kSynthUsage);
    return 2;
  }
  const std::optional<Arch> arch = ParseArch(flags->Get("arch"));
  if (!arch) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--arch '", flags->Get("arch"), "' is not one of ", SupportedArchNames())));
  }
  const std::string default_shape = RealShapeName(*arch);
  absl::StatusOr<SyntheticShape> shape =
      SyntheticShapeFor(*arch, flags->Get("shape", default_shape));
  if (!shape.ok()) return Fail(shape.status());
  absl::StatusOr<QuantPreset> preset = ParseQuantPreset(flags->Get("type", "q4_k_m"));
  if (!preset.ok()) return Fail(preset.status());
  absl::StatusOr<int64_t> seed = flags->GetInt("seed", 1);
  if (!seed.ok()) return Fail(seed.status());

  const bool show = !flags->Has("quiet") && isatty(STDERR_FILENO);
  const Stopwatch write_time;
  int last_percent = -1;
  const absl::Status status = WriteSyntheticModel(
      *arch, *shape, *preset, static_cast<uint64_t>(*seed), flags->Get("out"),
      [&](uint64_t done, uint64_t total) {
        const int percent = static_cast<int>(100 * done / std::max<uint64_t>(total, 1));
        if (show && percent != last_percent) {
          std::fprintf(stderr, "\rwriting %s: %d%%", flags->Get("out").c_str(), percent);
          last_percent = percent;
        }
      });
  if (show) std::fprintf(stderr, "\n");
  if (!status.ok()) return Fail(status);
  const double seconds = write_time.ElapsedSeconds();
  std::printf("wrote %s: %s %s (d %lld, %lld layers, ffn %lld, vocab %lld), %s, %.1f s\n",
              flags->Get("out").c_str(), std::string(ArchName(*arch)).c_str(), shape->name.c_str(),
              static_cast<long long>(shape->n_embd), static_cast<long long>(shape->n_layer),
              static_cast<long long>(shape->n_ff), static_cast<long long>(shape->n_vocab),
              QuantPresetName(*preset), seconds);
  return 0;
}

}  // namespace dllm
