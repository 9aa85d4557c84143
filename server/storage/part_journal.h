// The ranges of a pull's part file that are durably written, kept in a
// journal beside it (DEST/.stoker-pull/FILE.part.ranges), so that a pull
// killed in the middle of a shard and run again fetches only the bytes of
// the part file that are not on disk yet (docs/storage.md, "Resume").
//
// The journal is text, one line each:
//   stoker-part-ranges 1 SIZE KEY
//   BEGIN END CHECK
//   ...
// SIZE is the size of the file being pulled and KEY says which file it is a
// copy of (the shard's digest, or for a file packed without one a hash of
// the manifest: KeyOf), so a journal written for another version of the
// source is never used. Each further line names one range [BEGIN, END) of
// the part file, CHECK being the XXH3-64 of "BEGIN END KEY" in hex: a line
// torn by a crash in the middle of an append does not parse. A line is
// appended only after the bytes it names were fsynced (Add's REQUIRES), so
// every range a whole journal names is on disk.
//
// Nothing here is trusted for correctness: the pull still checks the whole
// part file against the shard's digest (or record by record) before it
// publishes it. A journal that lies (a power loss that kept the journal
// and lost the truncation of its part file) costs a refetch of the shard,
// never a bad shard.
//
// Thread-safe: Add may be called from many threads (each line is one
// O_APPEND write). A Reset while an Add runs may lose that Add's range,
// which then is fetched again; it never makes the journal name a range.
#ifndef STOKER_SERVER_STORAGE_PART_JOURNAL_H_
#define STOKER_SERVER_STORAGE_PART_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/dataset/part_files.h"

namespace stoker::storage {

class PartJournal {
 public:
  // The journal of the part file at `part`.
  static std::string PathOf(const std::string& part);

  // The key of a file whose manifest entry gives `digest` (empty if it has
  // none), in a manifest of text `manifest_text`.
  static std::string KeyOf(const std::string& digest,
                           const std::string& manifest_text);

  // The ranges the journal at `path` names, if it is whole, was written
  // for a file of `size` bytes and key `key`, and names only ranges inside
  // it. Otherwise: NotFound if there is no journal, DataLoss if it is torn
  // or names a range outside the file, FailedPrecondition if it belongs to
  // another file; the message says which.
  static absl::StatusOr<dataset::RangeSet> Load(const std::string& path,
                                                uint64_t size,
                                                const std::string& key);

  // A journal with no range yet, replacing whatever was at `path`.
  static absl::StatusOr<std::unique_ptr<PartJournal>> Create(
      const std::string& path, uint64_t size, const std::string& key);
  // The journal at `path`, which Load() accepted for `size` and `key`,
  // opened to append to.
  static absl::StatusOr<std::unique_ptr<PartJournal>> Reopen(
      const std::string& path, uint64_t size, const std::string& key);

  ~PartJournal();
  PartJournal(const PartJournal&) = delete;
  PartJournal& operator=(const PartJournal&) = delete;

  // Records that [begin, end) of the part file is written.
  // REQUIRES: those bytes were fsynced.
  absl::Status Add(uint64_t begin, uint64_t end);
  // Forgets every range (before the part file is fetched again).
  absl::Status Reset();

 private:
  PartJournal(int fd, std::string path, uint64_t size, std::string key);
  std::string Header() const;

  const int fd_;
  const std::string path_;
  const uint64_t size_;
  const std::string key_;
};

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_PART_JOURNAL_H_
