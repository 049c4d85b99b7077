#include "service/engine/stream_watchdog.h"

#include <utility>

#include "absl/status/status.h"

namespace dllm {
namespace {

// The live entries of `watched`; dead ones are dropped.
template <typename T>
std::vector<std::shared_ptr<T>> Live(std::vector<std::weak_ptr<T>>& watched) {
  std::vector<std::shared_ptr<T>> live;
  for (auto it = watched.begin(); it != watched.end();) {
    if (std::shared_ptr<T> p = it->lock()) {
      live.push_back(std::move(p));
      ++it;
    } else {
      it = watched.erase(it);
    }
  }
  return live;
}

}  // namespace

StreamWatchdog::StreamWatchdog(std::chrono::milliseconds tick)
    : tick_(tick), thread_([this] { Loop(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StreamWatchdog::Watch(const std::shared_ptr<GenerateMailbox>& mailbox) {
  std::lock_guard<std::mutex> lock(mu_);
  mailboxes_.push_back(mailbox);
}

void StreamWatchdog::Watch(const std::shared_ptr<StepOutbox>& outbox) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.push_back(outbox);
  // A session that registers after the drain began still ends promptly.
  if (draining_) wake_.notify_all();
}

void StreamWatchdog::StartDrain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  wake_.notify_all();
}

void StreamWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, tick_);
    if (stop_) break;
    std::vector<std::shared_ptr<GenerateMailbox>> mailboxes = Live(mailboxes_);
    std::vector<std::shared_ptr<StepOutbox>> sessions = Live(sessions_);
    const bool draining = draining_;
    // The streams are acted on outside the lock: they call into reactors.
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    for (const auto& m : mailboxes) m->MaybeHeartbeat(now);
    for (const auto& s : sessions) {
      if (draining) {
        s->End(absl::UnavailableError("server is draining"));
      } else {
        s->MaybeExpire(now);
      }
    }
    mailboxes.clear();  // released before the lock is taken again
    sessions.clear();
    lock.lock();
  }
}

}  // namespace dllm
