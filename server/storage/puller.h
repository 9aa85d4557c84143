// Puller: fetches the files of one pull (transfer.h) into their part files
// in DEST/.stoker-pull, checks each and publishes it by rename. Pull()
// decides what to fetch (pull.cc); this is the fetching.
//
// Each part file has a range journal beside it (part_journal.h): after a
// chunk is fetched and fsynced, its range is appended, so that a pull
// killed mid-shard and run again fetches only what the journal does not
// name (FileJob::resumed, which Pull() loads before the Puller starts).
//
// Thread-safe: FetchAll runs the chunks on `parallel` threads; the Puller
// is used by one FetchAll call at a time.
#ifndef STOKER_SERVER_STORAGE_PULLER_H_
#define STOKER_SERVER_STORAGE_PULLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/manifest.h"
#include "server/dataset/part_files.h"
#include "server/storage/part_journal.h"
#include "server/storage/store.h"
#include "server/storage/transfer.h"
#include "server/storage/transfer_util.h"

namespace stoker::storage {

// One file of the dataset to fetch.
struct FileJob {
  std::string name;
  uint64_t bytes = 0;
  std::string digest;                         // Empty: check by records.
  const dataset::ShardInfo* shard = nullptr;  // Null for a record index.
  // The journal key of this version of the file (PartJournal::KeyOf).
  std::string key;
  // The ranges of its part file that an interrupted pull of the same
  // file left, durably written, to keep; empty: the part file is created
  // anew.
  dataset::RangeSet resumed;
  std::atomic<uint64_t> chunks_left{0};
  // Set by FetchAll; used by the chunks of this file.
  std::unique_ptr<PartJournal> journal;
};

class Puller {
 public:
  // `source`, `options` and `meter` are borrowed for the Puller's life.
  // `state` is DEST/.stoker-pull.
  Puller(Store& source, std::string dest, std::string state,
         const TransferOptions& options, dataset::Manifest manifest,
         Meter* meter);
  ~Puller();

  // The part file of `name` in `state`.
  static std::string PartPath(const std::string& state,
                              const std::string& name);

  // Fetches `files` (those with `resumed` ranges keep their part file and
  // fetch the rest), publishes each; returns the first error.
  absl::Status FetchAll(std::vector<std::unique_ptr<FileJob>>& files);

 private:
  struct Chunk {
    FileJob* file;
    uint64_t offset;
    uint64_t length;
  };

  std::string PartPath(const FileJob& f) const {
    return PartPath(state_, f.name);
  }
  std::string SourceName(const FileJob& f) const;
  // Opens the part file of `f` and its journal: kept if `f` resumes,
  // created anew otherwise.
  absl::Status PreparePart(FileJob& f);
  void Fail(const absl::Status& s);
  bool Failed();
  absl::Status Fetch(FileJob& f, uint64_t offset, uint64_t length,
                     bool skip_present);
  void RunChunk(const Chunk& c);
  absl::Status Check(const FileJob& f);
  absl::Status Finish(FileJob& f);
  void Notice(const std::string& line);
  void Published(const std::string& name);

  Store& source_;
  const std::string dest_;
  const std::string state_;
  const TransferOptions& options_;
  const dataset::Manifest manifest_;
  Meter* const meter_;
  absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_PULLER_H_
