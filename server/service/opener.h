// Opener: runs every stream open for the transports, off their threads, and
// keeps the opens that must wait (for memory budget, or for a rank's old
// stream to end) without a thread each.
//
// An open is Prepare (the request's checks), then admission, then Complete
// (see StreamService). One thread does all three for every open: they take
// microseconds, except the wait for admission, where an open is parked in a
// list instead. Parked opens are tried again, in the order they came,
// whenever admission frees something (its listener wakes the thread), and
// at least every kPoll for their deadline and for a caller that gave up.
// An open of a dataset still being staged (staging_wait.h) waits the same
// way, before its checks: it is prepared again every kPoll until the
// dataset is servable, and answered with the staging progress when its
// deadline (at most admission_wait) passes first. A
// parked open counts against max_streams and max_streams_per_peer, so the
// list is as bounded as the streams are; a burst of a thousand opens costs a
// thousand list entries, not a thousand threads.
//
// Thread-safe. Owns one thread, started by Start() and joined by Stop();
// the destructor calls Stop().
#ifndef STOKER_SERVER_SERVICE_OPENER_H_
#define STOKER_SERVER_SERVICE_OPENER_H_

#include <deque>
#include <functional>
#include <list>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/service/stream_service.h"

namespace stoker::service {

class Opener {
 public:
  // Runs once per open with its outcome, on the opener's thread.
  using Done = std::function<void(absl::StatusOr<OpenedStream>)>;

  static constexpr absl::Duration kPoll = absl::Milliseconds(50);

  // `service` outlives this object.
  explicit Opener(StreamService* service);
  ~Opener();
  Opener(const Opener&) = delete;
  Opener& operator=(const Opener&) = delete;

  void Start();
  // Answers every open not yet answered with Unavailable, then joins.
  // Idempotent.
  void Stop();

  // Opens `spec` and calls `done` with the outcome. Waits for admission
  // until `deadline` (and at most the service's admission_wait) while
  // `cancelled` (optional) says no.
  void Submit(StreamSpec spec, absl::Time deadline,
              std::function<bool()> cancelled, Done done);

 private:
  struct Request {
    StreamSpec spec;
    absl::Time deadline;
    std::function<bool()> cancelled;
    Done done;
  };
  struct Parked {
    PendingOpen open;
    std::function<bool()> cancelled;
    Done done;
  };
  // An open of a dataset being staged; `until` is its deadline, at most
  // admission_wait from when it came.
  struct Staging {
    Request request;
    absl::Time until;
  };

  void Loop();
  // Tries `parked` once: true when it was answered (and so leaves the list).
  bool Retry(Parked& parked);
  // Prepares `r` and tries admission, parking it when it must wait for
  // admission; `staged_until` is set for an open waiting for staging.
  // Returns false when the open waits for its dataset's staging (the
  // caller keeps it), true when it was answered or parked.
  bool Begin(Request& r, absl::Time staged_until);

  StreamService* const service_;

  absl::Mutex mu_;
  absl::CondVar wake_cv_;
  std::deque<Request> incoming_ ABSL_GUARDED_BY(mu_);
  bool freed_ ABSL_GUARDED_BY(mu_) = false;  // Admission freed something.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Touched only by the thread (and by Stop() after joining it).
  std::list<Parked> parked_;
  std::list<Staging> staging_;
};

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_OPENER_H_
