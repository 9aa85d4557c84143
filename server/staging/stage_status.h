// StageStatus: what a Stager (stager.h) reports of one dataset's copy, for
// the stream open path (why an open waits), metrics and `stoker top`.
//
// Thread-safety: a plain value; the functions are pure.
#ifndef STOKER_SERVER_STAGING_STAGE_STATUS_H_
#define STOKER_SERVER_STAGING_STAGE_STATUS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace stoker::staging {

struct StageStatus {
  enum class State {
    kStarting,  // The manifest is not read yet.
    kWaiting,   // Another process holds the lock on `path`.
    kCopying,
    kComplete,  // Every file and the manifest are published.
    kFailed,
    kStopped,  // Stopped before the end (shutdown); resumed at next start.
  };
  State state = State::kStarting;
  std::string dataset;
  std::string source;  // As shown in messages: never a credential.
  std::string path;
  bool servable = false;     // Handed to the catalog.
  uint64_t num_samples = 0;  // From the manifest, once read.
  uint64_t bytes_total = 0;  // Of every shard and index.
  uint64_t bytes_done = 0;   // On local disk, checked or being written.
  uint64_t bytes_moved = 0;  // Fetched by this daemon (refetches too).
  // Of part files a killed copy had written, kept by this one (not in
  // bytes_moved); known once the copy is complete.
  uint64_t bytes_resumed = 0;
  uint64_t files_total = 0;
  uint64_t files_done = 0;
  uint64_t shards_total = 0;
  uint64_t shards_done = 0;
  uint64_t retries = 0;
  // Retried and final errors by HTTP status ("503", "403") or "transport"
  // for a failure without one.
  std::map<std::string, uint64_t> errors;
  uint64_t remote_records = 0;                 // Read by range from the source.
  absl::Time started = absl::InfinitePast();   // Of this copy.
  absl::Time finished = absl::InfinitePast();  // Complete or failed.
  // Bytes per second of this copy so far; 0 before any byte.
  double rate = 0;
  absl::Status error;  // Set when kFailed.

  double percent() const {
    return bytes_total == 0 ? 0 : 100.0 * bytes_done / bytes_total;
  }
  // Seconds left at the current rate; negative when unknown.
  double eta_seconds() const;
};

const char* StateName(StageStatus::State state);

// "42.0% (1.2 GiB of 2.9 GiB), 35.1 MiB/s, ETA 0:48", or what it waits for.
std::string DescribeProgress(const StageStatus& s);

// "HTTP 503 ..." in a storage error's message gives "503"; else
// "transport" for Unavailable (refused, cut, stalled), else the code's
// name in lower case ("data_loss", "resource_exhausted").
std::string ErrorClass(const absl::Status& s);

}  // namespace stoker::staging

#endif  // STOKER_SERVER_STAGING_STAGE_STATUS_H_
