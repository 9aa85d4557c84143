#include "server/service/opener.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/service/staging_wait.h"

namespace stoker::service {

Opener::Opener(StreamService* service) : service_(service) {
  // Under admission's lock: only set a flag and wake the thread.
  service_->SetAdmissionListener([this] {
    absl::MutexLock lock(&mu_);
    freed_ = true;
    wake_cv_.Signal();
  });
}

Opener::~Opener() {
  Stop();
  service_->SetAdmissionListener(nullptr);
}

void Opener::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void Opener::Stop() {
  std::deque<Request> unanswered;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_cv_.Signal();
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    unanswered.swap(incoming_);
  }
  const absl::Status stopping =
      absl::UnavailableError("stokerd is shutting down; reconnect");
  for (Parked& p : parked_) {
    service_->StopWaiting(p.open);
    p.done(stopping);
  }
  parked_.clear();
  for (Staging& s : staging_) s.request.done(stopping);
  staging_.clear();
  for (Request& r : unanswered) r.done(stopping);
}

void Opener::Submit(StreamSpec spec, absl::Time deadline,
                    std::function<bool()> cancelled, Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      incoming_.push_back(Request{std::move(spec), deadline,
                                  std::move(cancelled), std::move(done)});
      wake_cv_.Signal();
      return;
    }
  }
  done(absl::UnavailableError("stokerd is shutting down; reconnect"));
}

bool Opener::Retry(Parked& p) {
  bool waiting = true;
  absl::StatusOr<std::shared_ptr<StreamTicket>> ticket =
      service_->TryAdmit(p.open, &waiting);
  if (ticket.ok()) {
    p.done(service_->Complete(std::move(p.open), *std::move(ticket)));
    return true;
  }
  if (!waiting) {
    p.done(ticket.status());
    return true;
  }
  if (absl::Now() >= p.open.deadline) {
    service_->StopWaiting(p.open);
    p.done(ticket.status());
    return true;
  }
  if (p.cancelled && p.cancelled()) {
    service_->StopWaiting(p.open);
    p.done(absl::CancelledError(absl::StrCat(
        "the client gave up while waiting: ", ticket.status().message())));
    return true;
  }
  return false;
}

void Opener::Loop() {
  for (;;) {
    std::deque<Request> incoming;
    {
      absl::MutexLock lock(&mu_);
      if (incoming_.empty() && !freed_ && !stopping_) {
        if (parked_.empty() && staging_.empty()) {
          while (incoming_.empty() && !freed_ && !stopping_) wake_cv_.Wait(&mu_);
        } else {
          wake_cv_.WaitWithTimeout(&mu_, kPoll);
        }
      }
      if (stopping_) return;
      incoming.swap(incoming_);
      freed_ = false;
    }
    // The parked ones first: they came earlier.
    for (auto it = parked_.begin(); it != parked_.end();) {
      it = Retry(*it) ? parked_.erase(it) : std::next(it);
    }
    for (auto it = staging_.begin(); it != staging_.end();) {
      it = Begin(it->request, it->until) ? staging_.erase(it) : std::next(it);
    }
    for (Request& r : incoming) {
      if (Begin(r, absl::InfinitePast())) continue;
      const absl::Duration wait =
          absl::Seconds(service_->options().admission_wait_seconds);
      const absl::Time until = std::min(r.deadline, absl::Now() + wait);
      staging_.push_back(Staging{std::move(r), until});
    }
  }
}

bool Opener::Begin(Request& r, absl::Time staged_until) {
  absl::StatusOr<PendingOpen> open = service_->Prepare(r.spec, r.deadline);
  if (!open.ok()) {
    if (!IsStaging(open.status())) {
      r.done(open.status());
      return true;
    }
    if (staged_until == absl::InfinitePast()) return false;  // Just came.
    if (absl::Now() >= staged_until) {
      r.done(absl::UnavailableError(absl::StrCat(
          open.status().message(),
          "; the open gave up waiting for it (limits.admission_wait, or the "
          "request's open_timeout); retry later")));
      return true;
    }
    if (r.cancelled && r.cancelled()) {
      r.done(absl::CancelledError(absl::StrCat(
          "the client gave up while waiting: ", open.status().message())));
      return true;
    }
    return false;
  }
  Parked p{*std::move(open), std::move(r.cancelled), std::move(r.done)};
  bool waiting = false;
  absl::StatusOr<std::shared_ptr<StreamTicket>> ticket =
      service_->TryAdmit(p.open, &waiting);
  if (ticket.ok()) {
    p.done(service_->Complete(std::move(p.open), *std::move(ticket)));
  } else if (!waiting) {
    p.done(ticket.status());
  } else if (!Retry(p)) {  // Deadline already past, or cancelled?
    parked_.push_back(std::move(p));
  }
  return true;
}

}  // namespace stoker::service
