// `dllm-client`: the command-line client of dllm-server (generate, step,
// info, health, tokenize). Talks gRPC only, through DllmClient.
//
// The flag convention of all three clients (this one, Python's and Node's):
// flags go before or after the command, as `--name value` or `--name=value`;
// `--` ends the flags. Usage errors (unknown flags, values that are not what
// the flag takes) print "dllm-client: what is wrong" and the usage, exit 2;
// failures print "error: CODE: message" (the gRPC status code name), exit 1.
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/canvas_view.h"
#include "client/dllm_client.h"
#include "engine/base/flags.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

constexpr const char* kUsage =
    "usage: dllm-client COMMAND [options] [ARG]   (options before or after COMMAND)\n"
    "commands:\n"
    "  generate [generation options] [--show-canvas] [--json] PROMPT\n"
    "      streams the text as it stabilizes (--json: one JSON event per line)\n"
    "  step [generation options] PROMPT\n"
    "      a client-driven session; reads commands from stdin:\n"
    "      advance [N] | forward [K] [POS...] | commit POS=TOKEN ... | rewind STEP |\n"
    "      canvas | close\n"
    "  info [--json]                       model and server information\n"
    "  health [--service NAME] [--wait-seconds S]   exit 0 when SERVING\n"
    "  tokenize [--chat] [--system S] [--json] TEXT\n"
    "connection options: --target HOST:PORT (default 127.0.0.1:50051) --tls-ca FILE\n"
    "  [--tls-server-name NAME] --timeout-seconds S (deadline; unary calls default 30)\n"
    "generation options: --gen-length N --steps N --block-length N --algorithm NAME\n"
    "  (low_confidence, random, origin, maskgit_plus, topk_margin, entropy)\n"
    "  --temperature T --top-p P --top-k K --alg-temp T --eps E --cfg C --seed S\n"
    "  --threshold X --no-early-exit --chat --system S --tokens 1,2,3 (instead of PROMPT)\n"
    "  --detail final|text|steps|canvas --step-stride N --top-candidates K --timings\n"
    "  --model NAME --request-id ID\n";

const std::set<std::string> kBoolFlags = {"show-canvas", "json", "chat", "no-early-exit",
                                          "timings"};

const std::set<std::string> kConnectionFlags = {"target", "tls-ca", "tls-server-name",
                                                "timeout-seconds"};
const std::set<std::string> kGenerationFlags = {
    "gen-length",  "steps",  "block-length", "algorithm",     "alg",
    "temperature", "top-p",  "top-k",        "alg-temp",      "eps",
    "cfg",         "seed",   "threshold",    "no-early-exit", "chat",
    "system",      "tokens", "detail",       "step-stride",   "top-candidates",
    "timings",     "model",  "request-id",   "show-canvas",   "json"};

std::set<std::string> Union(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// Every flag that takes a value, over all commands (each command then
// checks its own with CheckOnly).
std::set<std::string> ValueFlags() {
  std::set<std::string> all = Union(Union(kConnectionFlags, kGenerationFlags), {"service", "wait-seconds"});
  for (const std::string& b : kBoolFlags) all.erase(b);
  return all;
}

// ---- output helpers ----

int Fail(const absl::Status& status) {
  std::fflush(stdout);  // what was printed before the error comes first
  std::fprintf(stderr, "error: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "dllm-client: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

std::string AlgorithmName(v1::Algorithm algorithm) {
  return absl::AsciiStrToLower(absl::StripPrefix(v1::Algorithm_Name(algorithm), "ALGORITHM_"));
}

std::string FinishName(v1::FinishReason reason) {
  return std::string(absl::StripPrefix(v1::FinishReason_Name(reason), "FINISH_REASON_"));
}

// ---- building requests from flags ----

absl::Status ParseAlgorithm(const std::string& name, v1::Algorithm* out) {
  const std::string upper = absl::AsciiStrToUpper(name);
  if (v1::Algorithm_Parse(absl::StrCat("ALGORITHM_", upper), out) &&
      *out != v1::ALGORITHM_UNSPECIFIED) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--algorithm: unknown ", name,
                   " (low_confidence, random, origin, maskgit_plus, topk_margin, entropy)"));
}

absl::Status FillPrompt(const ParsedFlags& flags, v1::Prompt* prompt) {
  if (flags.Has("tokens")) {
    if (!flags.positional.empty()) {
      return absl::InvalidArgumentError("give either --tokens or a PROMPT, not both");
    }
    for (absl::string_view part : absl::StrSplit(flags.Get("tokens"), ',', absl::SkipEmpty())) {
      uint32_t id;
      if (!absl::SimpleAtoi(part, &id)) {
        return absl::InvalidArgumentError(absl::StrCat("--tokens: not a token id: ", part));
      }
      prompt->mutable_token_ids()->add_ids(id);
    }
  } else {
    if (flags.positional.size() != 1) {
      return absl::InvalidArgumentError("expected one PROMPT argument (quote it)");
    }
    prompt->set_text(flags.positional[0]);
  }
  prompt->set_apply_chat_template(flags.Has("chat"));
  if (flags.Has("system")) prompt->set_system(flags.Get("system"));
  return absl::OkStatus();
}

absl::Status FillSettings(const ParsedFlags& flags, v1::DiffusionParams* diffusion,
                          v1::SamplingParams* sampling) {
  uint32_t u = 0;
  if (flags.Has("gen-length")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("gen-length", &u));
    diffusion->set_gen_length(u);
  }
  if (flags.Has("steps")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("steps", &u));
    diffusion->set_steps(u);
  }
  if (flags.Has("block-length")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("block-length", &u));
    diffusion->set_block_length(u);
  }
  const std::string algorithm = flags.Get("algorithm", flags.Get("alg"));
  if (!algorithm.empty()) {
    v1::Algorithm a;
    DLLM_RETURN_IF_ERROR(ParseAlgorithm(algorithm, &a));
    diffusion->set_algorithm(a);
  }
  float f = 0;
  if (flags.Has("threshold")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("threshold", &f));
    diffusion->set_threshold(f);
  }
  if (flags.Has("eps")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("eps", &f));
    diffusion->set_eps(f);
  }
  if (flags.Has("cfg")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("cfg", &f));
    diffusion->set_cfg_scale(f);
  }
  if (flags.Has("no-early-exit")) diffusion->set_early_exit(false);
  if (flags.Has("temperature")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("temperature", &f));
    sampling->set_temperature(f);
  }
  if (flags.Has("top-p")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("top-p", &f));
    sampling->set_top_p(f);
  }
  if (flags.Has("top-k")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("top-k", &u));
    sampling->set_top_k(u);
  }
  if (flags.Has("alg-temp")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("alg-temp", &f));
    sampling->set_alg_temp(f);
  }
  if (flags.Has("seed")) {
    uint64_t seed = 0;
    DLLM_RETURN_IF_ERROR(flags.GetNumber("seed", &seed));
    sampling->set_seed(seed);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ParsedFlags& flags) {
  v1::GenerateRequest request;
  request.set_request_id(flags.Get("request-id"));
  request.set_model(flags.Get("model"));
  DLLM_RETURN_IF_ERROR(FillPrompt(flags, request.mutable_prompt()));
  DLLM_RETURN_IF_ERROR(FillSettings(flags, request.mutable_diffusion(), request.mutable_sampling()));
  v1::StreamOptions* stream = request.mutable_stream();
  const std::string detail = flags.Get("detail", flags.Has("show-canvas") ? "canvas" : "text");
  static const std::map<std::string, v1::Detail> kDetails = {{"final", v1::DETAIL_FINAL_ONLY},
                                                             {"text", v1::DETAIL_TEXT},
                                                             {"steps", v1::DETAIL_STEPS},
                                                             {"canvas", v1::DETAIL_CANVAS}};
  auto it = kDetails.find(detail);
  if (it == kDetails.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--detail: unknown ", detail, " (final, text, steps, canvas)"));
  }
  stream->set_detail(it->second);
  uint32_t u = 0;
  if (flags.Has("step-stride")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("step-stride", &u));
    stream->set_step_stride(u);
  }
  if (flags.Has("top-candidates")) {
    DLLM_RETURN_IF_ERROR(flags.GetNumber("top-candidates", &u));
    stream->set_top_candidates(u);
  }
  stream->set_include_timings(flags.Has("timings") || flags.Has("show-canvas"));
  return request;
}

// The connection flags; a bad value is a usage error.
absl::StatusOr<ClientOptions> ConnectionOptions(const ParsedFlags& flags) {
  ClientOptions options;
  options.target = flags.Get("target", options.target);
  options.tls_ca_file = flags.Get("tls-ca");
  options.tls_server_name = flags.Get("tls-server-name");
  DLLM_RETURN_IF_ERROR(flags.GetNumber("timeout-seconds", &options.timeout_seconds));
  if (flags.Has("timeout-seconds") && !(options.timeout_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout-seconds: '", flags.Get("timeout-seconds"), "' must be > 0 seconds"));
  }
  return options;
}

// A client for the connection flags, or nullptr once the error is printed
// and *exit_code set: 2 for a bad flag value, 1 when the client cannot be made.
std::unique_ptr<DllmClient> Connect(const ParsedFlags& flags, int* exit_code) {
  absl::StatusOr<ClientOptions> options = ConnectionOptions(flags);
  if (!options.ok()) {
    *exit_code = UsageError(options.status());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<DllmClient>> client = DllmClient::Create(*options);
  if (!client.ok()) {
    *exit_code = Fail(client.status());
    return nullptr;
  }
  return *std::move(client);
}

// ---- generate ----

int RunGenerate(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, kGenerationFlags)); !s.ok()) {
    return UsageError(s);
  }
  auto request = BuildGenerateRequest(flags);
  if (!request.ok()) return UsageError(request.status());
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;

  const bool json = flags.Has("json");
  const bool show_canvas = flags.Has("show-canvas") && !json;
  const bool live = show_canvas && isatty(STDOUT_FILENO);
  const std::string prompt_text = request->prompt().has_text() ? request->prompt().text() : "";
  CanvasView view;
  std::string streamed;  // the text deltas printed so far
  bool got_final = false;
  v1::Final final;
  const absl::Status status = client->Generate(*request, [&](const v1::GenerateEvent& event) {
    if (json) {
      std::printf("%s\n", ToJson(event).c_str());
      std::fflush(stdout);
    }
    switch (event.event_case()) {
      case v1::GenerateEvent::kStarted:
        view.Reset(event.started());
        if (show_canvas && !live) {
          const v1::Started& s = event.started();
          std::printf(
              "started: %u prompt tokens, gen_length %u, block_length %u, %u steps, %s, seed "
              "%llu\n",
              s.prompt_tokens(), s.gen_length(), s.block_length(), s.planned_steps(),
              AlgorithmName(s.algorithm()).c_str(), static_cast<unsigned long long>(s.seed()));
        }
        break;
      case v1::GenerateEvent::kStep: {
        const v1::StepEvent& step = event.step();
        view.Apply(step);
        if (live) {
          std::string frame = "\x1b[H\x1b[2J";
          absl::StrAppendFormat(&frame, "step %u/%u  committed %d  masked %u  %.0f ms\n\n",
                                step.step(), step.planned_steps(), step.committed_size(),
                                step.masked_remaining(), step.timings().step_seconds() * 1e3);
          frame += "\x1b[2m" + VisiblePiece(prompt_text) + "\x1b[0m" + view.Render(true) + "\n";
          std::fwrite(frame.data(), 1, frame.size(), stdout);
        } else if (show_canvas) {
          std::printf("step %u/%u: committed %d, %u masked left, %.1f ms\n", step.step(),
                      step.planned_steps(), step.committed_size(), step.masked_remaining(),
                      step.timings().step_seconds() * 1e3);
        } else if (!json) {
          std::fwrite(step.text_delta().data(), 1, step.text_delta().size(), stdout);
          streamed += step.text_delta();
        }
        std::fflush(stdout);
        break;
      }
      case v1::GenerateEvent::kFinal:
        got_final = true;
        final = event.final();
        break;
      default:
        break;
    }
    return true;
  });
  if (!status.ok()) {
    if (!json && !show_canvas) std::printf("\n");
    return Fail(status);
  }
  if (!got_final) return Fail(absl::InternalError("the stream ended without a Final event"));
  if (!json) {
    if (show_canvas) {
      std::printf("%s\n", final.text().c_str());
    } else if (absl::StartsWith(final.text(), streamed)) {
      // Whatever the events did not stream (all of it with --detail final).
      std::printf("%s\n", final.text().substr(streamed.size()).c_str());
    } else {
      std::printf("\n%s\n", final.text().c_str());
    }
    std::fprintf(stderr, "finish: %s, %u tokens, %u steps, %.3f s, %.1f tokens/s, seed %llu\n",
                 FinishName(final.finish_reason()).c_str(), final.usage().generated_tokens(),
                 final.usage().steps(), final.timings().total_seconds(),
                 final.timings().tokens_per_second(),
                 static_cast<unsigned long long>(final.seed()));
  }
  return 0;
}

// ---- step ----

void PrintStepEvent(const v1::StepEvent& step, CanvasView& view) {
  view.Apply(step);
  std::vector<std::string> committed;
  for (const v1::CommittedToken& t : step.committed()) {
    committed.push_back(
        absl::StrCat(t.position(), "=", t.token_id(), "'", VisiblePiece(t.piece()), "'"));
  }
  std::printf("step %u/%u: committed %s; %u masked\n", step.step(), step.planned_steps(),
              committed.empty() ? "nothing" : absl::StrJoin(committed, " ").c_str(),
              step.masked_remaining());
}

void PrintFinal(const v1::Final& final) {
  std::printf("final: %s, %u tokens, %u steps%s: %s\n", FinishName(final.finish_reason()).c_str(),
              final.usage().generated_tokens(), final.usage().steps(),
              final.exited_early() ? " (early exit)" : "", final.text().c_str());
}

constexpr const char* kStepHelp =
    "commands: advance [N] | forward [K] [POS...] | commit POS=TOKEN ... | rewind STEP | canvas | "
    "close\n";

// One command line; returns false when the session is over.
bool RunStepCommand(const std::string& line, StepSession& session, CanvasView& view, bool* failed) {
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  if (words.empty() || words[0][0] == '#') return true;
  const std::string& op = words[0];
  auto report = [&](const absl::Status& s) {
    *failed = true;
    Fail(s);
  };
  auto number = [&](size_t i, uint32_t fallback, uint32_t* out) {
    if (words.size() <= i) {
      *out = fallback;
      return true;
    }
    if (absl::SimpleAtoi(words[i], out)) return true;
    report(absl::InvalidArgumentError(absl::StrCat(op, ": not a number: ", words[i])));
    return false;
  };
  if (op == "advance") {
    uint32_t n;
    if (!number(1, 1, &n)) return true;
    v1::Advance advance;
    advance.set_steps(n);
    advance.set_include_canvas(true);
    if (auto responses = session.Advance(advance); !responses.ok()) report(responses.status());
  } else if (op == "forward") {
    uint32_t k;
    if (!number(1, 5, &k)) return true;
    v1::Forward forward;
    forward.set_top_candidates(k);
    for (size_t i = 2; i < words.size(); ++i) {
      uint32_t pos;
      if (!number(i, 0, &pos)) return true;
      forward.add_positions(pos);
    }
    auto result = session.Forward(forward);
    if (!result.ok()) {
      report(result.status());
      return true;
    }
    std::printf("forward at step %u (%.1f ms):\n", result->step(), result->forward_seconds() * 1e3);
    for (const v1::PositionCandidates& pc : result->candidates()) {
      std::vector<std::string> cands;
      for (const v1::Candidate& c : pc.candidates()) {
        view.Learn(c.token_id(), c.piece());
        cands.push_back(
            absl::StrFormat("%u'%s' %.3f", c.token_id(), VisiblePiece(c.piece()), c.prob()));
      }
      std::printf("  %u: %s\n", pc.position(), absl::StrJoin(cands, ", ").c_str());
    }
  } else if (op == "commit") {
    v1::Commit commit;
    for (size_t i = 1; i < words.size(); ++i) {
      std::pair<std::string, std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      uint32_t pos, id;
      if (!absl::SimpleAtoi(kv.first, &pos) || !absl::SimpleAtoi(kv.second, &id)) {
        report(
            absl::InvalidArgumentError(absl::StrCat("commit: expected POS=TOKEN, got ", words[i])));
        return true;
      }
      v1::CommittedToken* t = commit.add_tokens();
      t->set_position(pos);
      t->set_token_id(id);
    }
    if (auto responses = session.Commit(commit); !responses.ok()) report(responses.status());
  } else if (op == "rewind") {
    uint32_t to;
    if (words.size() < 2) {
      report(absl::InvalidArgumentError("rewind: expected STEP"));
      return true;
    }
    if (!number(1, 0, &to)) return true;
    auto rewound = session.Rewind(to);
    if (!rewound.ok()) {
      report(rewound.status());
      return true;
    }
    view.RewindTo(rewound->step());
    std::printf("rewound to step %u; %u masked\n", rewound->step(), rewound->masked_remaining());
  } else if (op == "canvas") {
    std::printf("canvas at step %u (%u masked): %s\n", session.step(), view.masked(),
                view.Render(false).c_str());
    std::printf("ids: %s\n", absl::StrJoin(view.ids(), " ").c_str());
  } else if (op == "close" || op == "quit" || op == "exit") {
    return false;
  } else if (op == "help") {
    std::printf("%s", kStepHelp);
  } else {
    report(absl::InvalidArgumentError(absl::StrCat("unknown command ", op, "; ", kStepHelp)));
  }
  return true;
}

int RunStep(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, kGenerationFlags)); !s.ok()) {
    return UsageError(s);
  }
  v1::Open open;
  open.set_request_id(flags.Get("request-id"));
  open.set_model(flags.Get("model"));
  if (auto s = FillPrompt(flags, open.mutable_prompt()); !s.ok()) return UsageError(s);
  if (auto s = FillSettings(flags, open.mutable_diffusion(), open.mutable_sampling()); !s.ok()) {
    return UsageError(s);
  }
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  auto session = client->OpenSession(open);
  if (!session.ok()) return Fail(session.status());
  const v1::Started& s = (*session)->opened().started();
  CanvasView view;
  view.Reset(s);
  // Step events and Final are printed as they arrive, so a Final that comes
  // in late (with the next command) is shown too.
  (*session)->set_observer([&view](const v1::StepResponse& r) {
    if (r.has_step()) PrintStepEvent(r.step(), view);
    if (r.has_final()) PrintFinal(r.final());
  });
  std::printf(
      "opened session %s: %u prompt tokens, gen_length %u, block_length %u, %u steps, %s, seed "
      "%llu\n",
      (*session)->opened().session_id().c_str(), s.prompt_tokens(), s.gen_length(),
      s.block_length(), s.planned_steps(), AlgorithmName(s.algorithm()).c_str(),
      static_cast<unsigned long long>(s.seed()));
  std::fflush(stdout);

  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) std::printf("%s", kStepHelp);
  bool failed = false;
  std::string line;
  while (true) {
    if (interactive) {
      std::printf("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (!RunStepCommand(line, **session, view, &failed)) break;
    std::fflush(stdout);
  }
  const absl::Status closed = (*session)->Close();
  if (!closed.ok()) return Fail(closed);
  std::printf("closed\n");
  return failed ? 1 : 0;
}

// ---- info, health, tokenize ----

int RunInfo(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"json"})); !s.ok()) return UsageError(s);
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  auto model = client->GetModelInfo();
  if (!model.ok()) return Fail(model.status());
  auto server = client->GetServerInfo();
  if (!server.ok()) return Fail(server.status());
  if (flags.Has("json")) {
    std::printf("{\"model\":%s,\"server\":%s}\n", ToJson(*model).c_str(), ToJson(*server).c_str());
    return 0;
  }
  const v1::ModelInfo& m = *model;
  const v1::ServerInfo& sv = *server;
  std::printf("model: %s\n", m.name().c_str());
  std::printf("  architecture: %s, %u layers, n_embd %u, vocab %u, max context %u\n",
              m.architecture().c_str(), m.n_layer(), m.n_embd(), m.vocab_size(), m.max_context());
  std::printf("  weights: %s, %llu bytes (file %llu bytes)\n", m.weight_format().c_str(),
              static_cast<unsigned long long>(m.weight_bytes()),
              static_cast<unsigned long long>(m.file_bytes()));
  std::printf("  mask token %u, eos %s, chat template %s\n", m.mask_token_id(),
              absl::StrJoin(m.eos_token_ids(), ",").c_str(), m.chat_template().c_str());
  std::printf("  defaults: gen_length %u, steps %u, block_length %u, algorithm %s\n",
              m.default_diffusion().gen_length(), m.default_diffusion().steps(),
              m.default_diffusion().block_length(),
              AlgorithmName(m.default_diffusion().algorithm()).c_str());
  std::printf("server: dllm %s%s%s\n", sv.version().c_str(), sv.git_sha().empty() ? "" : " ",
              sv.git_sha().c_str());
  std::printf(
      "  cpu: %s, isa %s, %u engine threads (%u performance, %u efficiency cores), policy %s\n",
      sv.cpu().c_str(), sv.isa().c_str(), sv.engine_threads(), sv.performance_cores(),
      sv.efficiency_cores(), sv.cpu_policy().c_str());
  std::printf("  requests: %u running (max %u), %u waiting (max %u); sessions %u (max %u)\n",
              sv.requests_running(), sv.max_running(), sv.requests_waiting(), sv.max_waiting(),
              sv.sessions_open(), sv.max_sessions());
  std::printf("  uptime %.1f s%s\n", sv.uptime_seconds(), sv.draining() ? ", draining" : "");
  return 0;
}

int RunHealth(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"service", "wait-seconds"})); !s.ok()) {
    return UsageError(s);
  }
  double wait_seconds = 0;
  if (auto s = flags.GetNumber("wait-seconds", &wait_seconds); !s.ok()) return UsageError(s);
  if (wait_seconds < 0) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--wait-seconds: '", flags.Get("wait-seconds"), "' must be >= 0")));
  }
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  const std::string service = flags.Get("service");
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::microseconds(static_cast<int64_t>(wait_seconds * 1e6));
  using Health = grpc::health::v1::HealthCheckResponse;
  while (true) {
    auto status = client->CheckHealth(service);
    const bool serving = status.ok() && *status == Health::SERVING;
    if (serving || std::chrono::steady_clock::now() >= until) {
      if (!status.ok()) return Fail(status.status());
      std::printf("%s\n", Health::ServingStatus_Name(*status).c_str());
      return serving ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int RunTokenize(const ParsedFlags& flags) {
  if (auto s = flags.CheckOnly(Union(kConnectionFlags, {"chat", "system", "json"})); !s.ok()) {
    return UsageError(s);
  }
  if (flags.positional.size() != 1) {
    return UsageError(absl::InvalidArgumentError("expected one TEXT argument (quote it)"));
  }
  v1::TokenizeRequest request;
  request.set_text(flags.positional[0]);
  request.set_apply_chat_template(flags.Has("chat"));
  request.set_system(flags.Get("system"));
  int exit_code = 0;
  const std::unique_ptr<DllmClient> client = Connect(flags, &exit_code);
  if (client == nullptr) return exit_code;
  auto response = client->Tokenize(request);
  if (!response.ok()) return Fail(response.status());
  if (flags.Has("json")) {
    std::printf("%s\n", ToJson(*response).c_str());
    return 0;
  }
  std::printf("%d tokens\n", response->ids_size());
  for (int i = 0; i < response->ids_size(); ++i) {
    std::printf("%u\t%s\n", response->ids(i),
                i < response->pieces_size() ? VisiblePiece(response->pieces(i)).c_str() : "");
  }
  return 0;
}

// --help or -h anywhere before a "--" (which ends the options).
bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h" || (i == 1 && arg == "help")) return true;
  }
  return false;
}

int Main(int argc, char** argv) {
  if (argc < 2 || AsksForHelp(argc, argv)) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto flags = ParseFlags(argc - 1, argv + 1, ValueFlags(), kBoolFlags);
  if (!flags.ok()) return UsageError(flags.status());
  if (flags->help) {
    std::printf("%s", kUsage);
    return 0;
  }
  const std::string command = flags->TakeFirstPositional();
  if (command.empty()) return UsageError(absl::InvalidArgumentError("no command given"));
  if (command == "generate") return RunGenerate(*flags);
  if (command == "step") return RunStep(*flags);
  if (command == "info") return RunInfo(*flags);
  if (command == "health") return RunHealth(*flags);
  if (command == "tokenize") return RunTokenize(*flags);
  return UsageError(absl::InvalidArgumentError(absl::StrCat("unknown command ", command)));
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) { return dllm::Main(argc, argv); }
