#include "service/cli/synth_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/model/synthetic_model.h"
#include "service/cli/flags.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) { return FailCommand("synth", s); }

}  // namespace

int RunSynth(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, {"arch", "shape", "type", "seed", "out"}, {"quiet"});
  if (!flags.ok()) return Fail(flags.status());
  if (!flags->Has("arch") || !flags->Has("out") || !flags->positional.empty()) {
    std::fprintf(stderr,
                 "usage: dllm synth --arch llada|dream [--shape 8b|7b|1b|tiny|custom:d=,l=,h=,"
                 "kv=,ff=,v=] [--type q4_k_m|q5_k_m|q6_k|q8_0|q4_0|f16] [--seed S] --out FILE\n");
    return 2;
  }
  const std::optional<Arch> arch = ParseArch(flags->Get("arch"));
  if (!arch) return Fail(absl::InvalidArgumentError("--arch must be llada or dream"));
  const std::string default_shape = *arch == Arch::kLlada ? "8b" : "7b";
  absl::StatusOr<SyntheticShape> shape = SyntheticShapeFor(*arch, flags->Get("shape", default_shape));
  if (!shape.ok()) return Fail(shape.status());
  absl::StatusOr<QuantPreset> preset = ParseQuantPreset(flags->Get("type", "q4_k_m"));
  if (!preset.ok()) return Fail(preset.status());
  absl::StatusOr<int64_t> seed = flags->GetInt("seed", 1);
  if (!seed.ok()) return Fail(seed.status());

  const bool show = !flags->Has("quiet") && isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s %s (d %lld, %lld layers, ffn %lld, vocab %lld), %s, %.1f s\n",
              flags->Get("out").c_str(), std::string(ArchName(*arch)).c_str(), shape->name.c_str(),
              static_cast<long long>(shape->n_embd), static_cast<long long>(shape->n_layer),
              static_cast<long long>(shape->n_ff), static_cast<long long>(shape->n_vocab),
              QuantPresetName(*preset), seconds);
  return 0;
}

}  // namespace dllm
