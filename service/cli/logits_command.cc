#include "service/cli/logits_command.h"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/model/forward.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/cpu_topology.h"
#include "service/cli/file_digest.h"
#include "service/json/json.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) { return FailCommand("logits", s); }

absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("--previous: ", path, ": cannot read"));
  const std::streamoff size = in.tellg();
  if (size != static_cast<std::streamoff>(count * sizeof(float))) {
    return absl::InvalidArgumentError(absl::StrCat("--previous: ", path, " holds ", size,
                                                   " bytes; expected ", count,
                                                   " float32 (the canvas rows x n_vocab)"));
  }
  std::vector<float> v(count);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  if (!in) return absl::DataLossError(absl::StrCat("--previous: ", path, ": short read"));
  return v;
}

// The prompt rows of a canvas model's forward: --prompt-len, or as the
// reference's unified pass splits [prompt | canvas], all but the last
// canvas_length tokens (none when there are no more).
absl::StatusOr<int32_t> PromptLength(const ParsedFlags& flags, const ModelConfig& c,
                                     size_t n_tokens) {
  const int64_t fallback = c.canvas_length > 0 && static_cast<int64_t>(n_tokens) > c.canvas_length
                               ? static_cast<int64_t>(n_tokens) - c.canvas_length
                               : 0;
  absl::StatusOr<int64_t> p =
      flags.GetIntInRange("prompt-len", fallback, 0, static_cast<int64_t>(n_tokens));
  if (!p.ok()) return p.status();
  if (flags.Has("prompt-len") && !c.traits().gemma) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt-len: ", ArchName(c.arch), " has no causal prompt (its rows read every token)"));
  }
  return static_cast<int32_t>(*p);
}

absl::Status WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

constexpr char kLogitsUsage[] =
    "usage: dllm logits --model M --tokens 1,2,3 --out FILE [--rows 0,5] [--threads N]\n"
    "         [--isa auto|scalar|avx2|avx512|amx] [--prompt-len P] [--previous FILE]\n"
    "  one forward pass; raw float32 logits (rows x n_vocab, unshifted) to FILE, facts to "
    "FILE.json\n"
    "  Canvas models (DiffusionGemma): the first P tokens are the prompt (causal), the rest\n"
    "  the canvas (default P: all but the last canvas_length tokens, as the reference's\n"
    "  unified pass; default rows: the canvas's); --previous FILE: the previous step's\n"
    "  canvas logits (canvas rows x n_vocab float32) for self-conditioning at temperature 1,\n"
    "  as llama-diffusion-gemma-eval takes them.\n"
    "  Block-diffusion models (LLaDA2): the official full-window forward, block-causal\n"
    "  with --block-length N (default the file's, else 32) from position 0.\n";

// --rows (default: every row, DiffusionGemma's from the prompt's end) and
// --previous (DiffusionGemma's self-conditioning input: the canvas rows'
// logits of the step before).
absl::Status ReadRowsAndPrevious(const ParsedFlags& flags, const ModelConfig& c,
                                 const std::vector<int32_t>& tokens, int32_t prompt_len,
                                 std::vector<int32_t>* rows, std::vector<float>* previous) {
  if (flags.Has("rows")) {
    DLLM_ASSIGN_OR_RETURN(*rows, ParseIdList(flags.Get("rows"), "--rows"));
  } else {
    const size_t first = c.traits().gemma ? static_cast<size_t>(prompt_len) : 0;
    for (size_t i = first; i < tokens.size(); ++i) rows->push_back(static_cast<int32_t>(i));
  }
  if (flags.Has("previous")) {
    DLLM_ASSIGN_OR_RETURN(*previous, ReadFloats(flags.Get("previous"),
                                                (tokens.size() - static_cast<size_t>(prompt_len)) *
                                                    static_cast<size_t>(c.n_vocab)));
  }
  return absl::OkStatus();
}

// The attention of a logits run: the prompt (DiffusionGemma's causal
// prompt), the block length (LLaDA2's blocks).
struct LogitsMask {
  int32_t prompt_len = 0;
  int32_t block_length = 1;
};

// One forward over `tokens` under the model's own mask: the logits of
// `rows` into `logits`, and the forward's seconds.
absl::StatusOr<double> RunForward(const std::shared_ptr<const Model>& model,
                                  const std::vector<int32_t>& tokens,
                                  const std::vector<int32_t>& rows, LogitsMask mask,
                                  const std::vector<float>& previous, int threads,
                                  std::vector<float>* logits) {
  const ModelConfig& c = model->config();
  logits->assign(rows.size() * static_cast<size_t>(c.n_vocab), 0.0f);
  tbb::task_arena arena(threads);
  absl::Status status;
  ForwardStats stats;
  arena.execute([&] {
    absl::StatusOr<std::unique_ptr<ForwardPass>> pass =
        ForwardPass::Create(model, static_cast<int>(tokens.size()));
    if (!pass.ok()) {
      status = pass.status();
      return;
    }
    ForwardBatch batch;
    SequenceInput& in = batch.sequences.emplace_back();
    in.tokens = tokens;
    in.row_end = static_cast<int32_t>(tokens.size());
    in.logit_rows = rows;
    in.logits = logits->data();
    if (c.traits().gemma) in.mask = {MaskKind::kPromptCausal, 0, mask.prompt_len};
    if (c.block_length > 0) in.mask = {MaskKind::kBlockCausal, mask.block_length, 0};
    in.self_conditioning = previous;
    status = (*pass)->Run(batch, nullptr, &stats);
  });
  if (!status.ok()) return status;
  return stats.total;
}

}  // namespace

int RunLogits(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv,
                                                 {"model", "tokens", "out", "rows", "threads",
                                                  "isa", "prompt-len", "previous", "block-length"},
                                                 {});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kLogitsUsage);
  if (!flags->Has("model") || !flags->Has("tokens") || !flags->Has("out")) {
    std::fputs(kLogitsUsage, stderr);
    return 2;
  }
  absl::StatusOr<std::vector<int32_t>> tokens = ParseIdList(flags->Get("tokens"), "--tokens");
  if (!tokens.ok()) return Fail(tokens.status());
  const int default_threads = ReadCpuTopology().UsableThreads();
  absl::StatusOr<int64_t> threads = flags->GetIntInRange("threads", default_threads, 1, 1024);
  if (!threads.ok()) return Fail(threads.status());
  absl::StatusOr<IsaLevel> isa = ResolveIsaLevel(flags->Get("isa"));
  if (!isa.ok()) return Fail(isa.status());

  ModelOptions options;
  options.isa = *isa;
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(flags->Get("model"), options);
  if (!model.ok()) return Fail(model.status());
  const ModelConfig& c = (*model)->config();
  absl::StatusOr<int32_t> prompt_len = PromptLength(*flags, c, tokens->size());
  if (!prompt_len.ok()) return Fail(prompt_len.status());
  if (flags->Has("block-length") && c.block_length == 0) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--block-length: ", ArchName(c.arch), " is not block-causal (its rows read every token)")));
  }
  absl::StatusOr<int64_t> block_length =
      flags->GetIntInRange("block-length", std::max<int64_t>(c.block_length, 1), 1, 1 << 20);
  if (!block_length.ok()) return Fail(block_length.status());
  std::vector<int32_t> rows;
  std::vector<float> previous;
  if (absl::Status s = ReadRowsAndPrevious(*flags, c, *tokens, *prompt_len, &rows, &previous);
      !s.ok()) {
    return Fail(s);
  }
  std::vector<float> logits;
  absl::StatusOr<double> forward =
      RunForward(*model, *tokens, rows, {*prompt_len, static_cast<int32_t>(*block_length)},
                 previous, static_cast<int>(*threads), &logits);
  if (!forward.ok()) return Fail(forward.status());
  const double seconds = *forward;

  const std::string out = flags->Get("out");
  if (absl::Status s = WriteFile(out, logits.data(), logits.size() * sizeof(float)); !s.ok()) {
    return Fail(s);
  }
  const GgufFile& f = (*model)->file();
  Json meta = Json::object();
  Json tok = Json::array(), row_json = Json::array();
  for (int32_t t : *tokens) tok.push_back(t);
  for (int32_t r : rows) row_json.push_back(r);
  meta["model"] = f.path();
  absl::StatusOr<std::string> sha = Sha256File(f.path());
  if (!sha.ok()) return Fail(sha.status());
  meta["model_sha256"] = *sha;
  meta["tokens"] = tok;
  meta["rows"] = row_json;
  if (c.block_length > 0) meta["block_length"] = *block_length;
  if (c.traits().gemma) {
    meta["prompt_len"] = *prompt_len;
    meta["self_conditioning"] = !previous.empty();
  }
  meta["n_vocab"] = c.n_vocab;
  meta["dtype"] = "float32";
  meta["layout"] = "row-major, one row of n_vocab logits per entry of rows, unshifted";
  meta["threads"] = *threads;
  meta["isa"] = IsaLevelName(*isa);
  meta["forward_seconds"] = seconds;
  const std::string text = DumpJson(meta, 2) + "\n";
  if (absl::Status s = WriteFile(out + ".json", text.data(), text.size()); !s.ok()) return Fail(s);
  std::printf("wrote %zu x %lld logits to %s (%.1f ms, %s, %lld threads)\n", rows.size(),
              static_cast<long long>(c.n_vocab), out.c_str(), seconds * 1e3, IsaLevelName(*isa),
              static_cast<long long>(*threads));
  return 0;
}

}  // namespace dllm
