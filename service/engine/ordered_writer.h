// OrderedWriter: the one write-ordering core under both server streams
// (GenerateMailbox for Generate, StepOutbox for Step). Producers (the
// engine thread, the watchdog) post messages from any thread without
// blocking; the gRPC reactor behind `Sink` gets them one write at a time, in
// order, and one Close after the last. Every Sink call is made outside the
// lock, by whichever thread moved the state machine, so a reactor may call
// back into the writer from inside Write or Read.
//
// The rules every stream shares:
//   - one Write in flight; the rest wait in `pending_` (subclasses may merge
//     into it while it waits);
//   - End(status) closes after the waiting messages are written, Fail(status)
//     drops them and closes at once (and replaces a gentler End);
//   - a write that fails (the client went away) ends the call with CANCELLED;
//   - Close waits until no Write/Read call is running, and Detach (the
//     reactor's OnDone) follows Close, so the sink is valid for every call.
// Subclasses add what is theirs through the hooks below (read gating and op
// fences for Step, heartbeats for Generate), with the lock held.
#ifndef DLLM_SERVICE_ENGINE_ORDERED_WRITER_H_
#define DLLM_SERVICE_ENGINE_ORDERED_WRITER_H_

#include <deque>
#include <mutex>
#include <utility>

#include "absl/status/status.h"

namespace dllm {

template <typename Message>
class OrderedWriter {
 public:
  // The writing end of one call (the reactor).
  class Sink {
   public:
    virtual ~Sink() = default;
    // Starts writing `message`, which stays valid until OnWriteDone.
    virtual void Write(const Message* message) = 0;
    // Starts reading the client's next message (streams that read).
    virtual void Read() {}
    // Ends the call with `status`.
    virtual void Close(const absl::Status& status) = 0;
  };

  // `sink` (non-owning) must stay valid until Detach().
  explicit OrderedWriter(Sink* sink) : sink_(sink) {}
  virtual ~OrderedWriter() = default;
  OrderedWriter(const OrderedWriter&) = delete;
  OrderedWriter& operator=(const OrderedWriter&) = delete;

  // Ends the call with `status` once every waiting message is written (and
  // the subclass no longer holds the close).
  void End(const absl::Status& status) {
    Act([&] { EndLocked(status); });
  }
  // Ends the call with `status` (not OK) now; waiting messages are dropped.
  void Fail(const absl::Status& status) {
    Act([&] { FailLocked(status); });
  }

  // Reactor side.
  void OnWriteDone(bool ok) {
    Act([&] {
      in_flight_ = false;
      // The client went away; the reactor's OnCancel stops the work.
      if (!ok) FailLocked(absl::CancelledError("the stream broke while writing"));
    });
  }
  void Detach() {  // the call is done; the sink is gone
    std::lock_guard<std::mutex> lock(mu_);
    sink_ = nullptr;
    closed_ = true;
  }

  int events_sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 protected:
  // Runs `change` under the lock, then makes the Sink call it enables (if
  // any) outside it: every mutation of a writer goes through here.
  template <typename Change>
  void Act(Change&& change) {
    Action action;
    {
      std::lock_guard<std::mutex> lock(mu_);
      change();
      action = NextLocked();
    }
    Run(action);
  }

  void EndLocked(const absl::Status& status) {
    if (end_wanted_) return;
    end_wanted_ = true;
    end_status_ = status;
  }
  void FailLocked(const absl::Status& status) {
    if (closed_ || failed_) return;
    pending_.clear();
    failed_ = true;
    end_wanted_ = true;
    end_status_ = status;
  }

  // Hooks, called with the lock held.
  // Whether to start reading now (then the subclass records that it reads).
  virtual bool StartReadLocked() { return false; }
  // Whether an End must still wait (Step: for the op in progress).
  virtual bool HoldCloseLocked() const { return false; }
  // A write is starting.
  virtual void OnWriteLocked() {}
  // Called once, outside the lock, just before Close: `sent` messages.
  virtual void OnClosing(int sent) { (void)sent; }

  // The call is over (closed, or the reactor detached).
  bool done_locked() const { return closed_ || sink_ == nullptr; }
  // A stream that takes no more messages: over, or failed.
  bool over_locked() const { return done_locked() || failed_; }

  mutable std::mutex mu_;
  std::deque<Message> pending_;  // waiting behind the write in flight
  bool in_flight_ = false;
  bool end_wanted_ = false;
  bool failed_ = false;
  bool closed_ = false;

 private:
  enum class Action { kNone, kWrite, kRead, kClose };

  Action NextLocked() {
    if (closed_ || sink_ == nullptr) return Action::kNone;
    if (!in_flight_ && !pending_.empty()) {
      current_ = std::move(pending_.front());
      pending_.pop_front();
      in_flight_ = true;
      ++sent_;
      ++sink_calls_;
      OnWriteLocked();
      return Action::kWrite;
    }
    if (in_flight_ || !pending_.empty()) return Action::kNone;
    if (end_wanted_) {
      if ((!failed_ && HoldCloseLocked()) || sink_calls_ > 0) return Action::kNone;
      closed_ = true;
      return Action::kClose;
    }
    if (StartReadLocked()) {
      ++sink_calls_;
      return Action::kRead;
    }
    return Action::kNone;
  }

  void Run(Action action) {
    while (action != Action::kNone) {
      switch (action) {
        case Action::kNone:
          return;
        case Action::kWrite:
          sink_->Write(&current_);
          break;
        case Action::kRead:
          sink_->Read();
          break;
        case Action::kClose:
          OnClosing(sent_);
          sink_->Close(end_status_);
          return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      --sink_calls_;
      action = NextLocked();
    }
  }

  Sink* sink_;          // non-owning; null after Detach
  Message current_;     // the write in flight
  int sink_calls_ = 0;  // Write/Read calls running outside the lock
  int sent_ = 0;
  absl::Status end_status_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_ORDERED_WRITER_H_
