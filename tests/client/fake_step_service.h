// FakeStepService: an in-process stand-in for dllm-server's Step RPC that
// follows dllm.proto's Step contract on a toy canvas (`gen_length_`
// positions, mask id 9): each sampler step commits the leftmost masked
// position with token 100 + position; Forward proposes 200 + position.
// Lets the client's Step handling be tested without the real server.
#ifndef DLLM_TESTS_CLIENT_FAKE_STEP_SERVICE_H_
#define DLLM_TESTS_CLIENT_FAKE_STEP_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dllm/v1/dllm.grpc.pb.h"

namespace dllm::testing {

inline constexpr uint32_t kFakeMask = 9;

class FakeStepService final : public v1::DiffusionLM::Service {
 public:
  grpc::Status Step(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::StepResponse, v1::StepRequest>* stream) override {
    v1::StepRequest request;
    std::vector<std::vector<uint32_t>> history;  // canvas after each step
    while (stream->Read(&request)) {
      v1::StepResponse r;
      r.set_seq(request.seq());
      r.set_request_id("fake-request");
      auto error = [&](int code, const std::string& message) {
        r.mutable_error()->set_code(code);
        r.mutable_error()->set_message(message);
        stream->Write(r);
      };
      auto masked = [&] {
        uint32_t n = 0;
        for (uint32_t id : history.back()) n += id == kFakeMask;
        return n;
      };
      // Complete, or stopped early like the engine's early exit (Final with
      // positions still masked).
      auto done = [&] {
        return masked() == 0 || (early_exit_step_ > 0 && history.size() - 1 == early_exit_step_);
      };
      auto send_step = [&](std::vector<std::pair<uint32_t, uint32_t>> committed) {
        v1::StepResponse s = r;
        v1::StepEvent* e = s.mutable_step();
        e->set_step(static_cast<uint32_t>(history.size() - 1));
        e->set_planned_steps(gen_length_);
        for (auto [pos, id] : committed) {
          v1::CommittedToken* t = e->add_committed();
          t->set_position(pos);
          t->set_token_id(id);
          t->set_piece(absl::StrCat("t", pos));
        }
        e->set_masked_remaining(masked());
        e->set_final_follows(done());
        stream->Write(s);
      };
      auto send_final = [&] {
        v1::StepResponse f = r;
        f.mutable_final()->set_finish_reason(v1::FINISH_REASON_LENGTH);
        f.mutable_final()->set_text("done");
        stream->Write(f);
      };
      switch (request.op_case()) {
        case v1::StepRequest::kOpen:
          history.assign(1, std::vector<uint32_t>(gen_length_, kFakeMask));
          r.mutable_opened()->set_session_id("s1");
          r.mutable_opened()->mutable_started()->set_gen_length(gen_length_);
          r.mutable_opened()->mutable_started()->set_mask_token_id(kFakeMask);
          r.mutable_opened()->mutable_started()->set_planned_steps(gen_length_);
          stream->Write(r);
          break;
        case v1::StepRequest::kAdvance: {
          if (done()) {
            error(9, "advance: the canvas is complete");
            break;
          }
          const uint32_t n = std::max(1u, request.advance().steps());
          for (uint32_t i = 0; i < n && !done(); ++i) {
            std::vector<uint32_t> next = history.back();
            uint32_t pos = 0;
            while (next[pos] != kFakeMask) ++pos;
            next[pos] = 100 + pos;
            history.push_back(next);
            send_step({{pos, 100 + pos}});
          }
          if (done()) send_final();
          break;
        }
        case v1::StepRequest::kForward: {
          v1::ForwardResult* f = r.mutable_forward();
          f->set_step(static_cast<uint32_t>(history.size() - 1));
          for (uint32_t p = 0; p < gen_length_; ++p) {
            if (history.back()[p] != kFakeMask) continue;
            const auto& wanted = request.forward().positions();
            if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), p) == wanted.end())
              continue;
            v1::Candidate* c = f->add_candidates()->add_candidates();
            f->mutable_candidates(f->candidates_size() - 1)->set_position(p);
            c->set_token_id(200 + p);
            c->set_prob(0.5f);
          }
          stream->Write(r);
          break;
        }
        case v1::StepRequest::kCommit: {
          std::vector<uint32_t> next = history.back();
          std::vector<std::pair<uint32_t, uint32_t>> committed;
          bool ok = true;
          for (const v1::CommittedToken& t : request.commit().tokens()) {
            if (t.position() >= gen_length_ || next[t.position()] != kFakeMask) {
              error(3, absl::StrCat("commit.tokens.position: ", t.position(), " is not masked"));
              ok = false;
              break;
            }
            next[t.position()] = t.token_id();
            committed.push_back({t.position(), t.token_id()});
          }
          if (!ok) break;
          history.push_back(next);
          send_step(committed);
          if (done()) send_final();
          break;
        }
        case v1::StepRequest::kRewind:
          if (request.rewind().to_step() >= history.size()) {
            error(3, "rewind.to_step: past the current step");
            break;
          }
          history.resize(request.rewind().to_step() + 1);
          r.mutable_rewound()->set_step(request.rewind().to_step());
          r.mutable_rewound()->set_masked_remaining(masked());
          stream->Write(r);
          break;
        case v1::StepRequest::kClose:
          r.mutable_closed();
          stream->Write(r);
          return grpc::Status::OK;
        default:
          error(3, "op: missing");
      }
    }
    return grpc::Status::OK;
  }

  uint32_t gen_length_ = 4;
  uint32_t early_exit_step_ = 0;  // > 0: Final after that many steps
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_CLIENT_FAKE_STEP_SERVICE_H_
