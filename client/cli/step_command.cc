// dllm-client step: a client-driven session, commands read from stdin.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/canvas_view.h"
#include "client/cli/common.h"

namespace dllm::client_cli {
namespace {

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

}  // namespace

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

}  // namespace dllm::client_cli
