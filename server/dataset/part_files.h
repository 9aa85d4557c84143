// The bytes of a dataset's shards that are already on local disk while it is
// staged, shared by the whole-shard copy (storage/transfer.h's Pull) and the
// records read by range (remote_records.h), so that each byte crosses the
// link once (docs/storage.md, "Fetching each byte once").
//
// The copy writes every shard into a part file (DEST/.stoker-pull/FILE.part)
// created at its full size. For each part file it opened here, PartFiles
// keeps the byte ranges known to be written (a RangeSet):
//   - a range the copy fetched is marked present (MarkPresent);
//   - bytes a ranged read fetched are written at their offset into the part
//     file and marked present (Write);
//   - the copy asks, for each of its chunks, only for the ranges not present
//     (Missing), and a ranged read of a present range is served from the
//     part file (Read).
// The copy checks the whole part file against the shard's digest before it
// publishes it, so bytes written here are never published unchecked; a bad
// range fails the check and the copy fetches the shard again.
//
// The copy fetches a chunk in pieces, claiming each piece's missing ranges
// before its GET (Claim) and releasing them once written (Release): a read
// of bytes inside a piece in flight may wait for it instead of fetching
// the same bytes again (Read's `wait_for` says when). A read that brings a
// whole block claims what is neither present nor claimed (ClaimFree), and
// the copy's Claim waits for such a claim rather than fetch it too.
//
// Close(file) ends the sharing of a part file (its bytes are synced): the
// copy calls it before it checks and renames the file, and CloseAll() when
// it returns, so nothing is written into a published file or into a part
// file that a later copy truncates. Close first lets the reads that wait on
// the file take what is present (a read woken by the copy's last piece
// gets its bytes from here, not from the source); once it begins, Write
// and ClaimFree do nothing, and once closed, Read returns nothing.
//
// Thread-safe: one mutex, held for the pread/pwrite of a record (records are
// small; the copy's pieces are written by the copy itself, outside it). The
// read path of published shards never comes here.
#ifndef STOKER_SERVER_DATASET_PART_FILES_H_
#define STOKER_SERVER_DATASET_PART_FILES_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace stoker::dataset {

// A set of byte ranges [begin, end), kept as disjoint, non-adjacent runs.
// Thread-compatible.
class RangeSet {
 public:
  using Range = std::pair<uint64_t, uint64_t>;  // [begin, end)

  void Add(uint64_t begin, uint64_t end);
  // Whether every byte of [begin, end) is in the set (true when empty).
  bool Contains(uint64_t begin, uint64_t end) const;
  // The ranges of [begin, end) to fetch so that all of it is present: the
  // gaps of the set in it, in order, where two gaps that only a present run
  // shorter than `min_kept` separates become one range (fetching those
  // bytes again costs less than one more request).
  std::vector<Range> Missing(uint64_t begin, uint64_t end,
                             uint64_t min_kept) const;
  // Bytes in the set.
  uint64_t bytes() const;
  // Bytes of the set in [begin, end).
  uint64_t bytes(uint64_t begin, uint64_t end) const;
  const std::map<uint64_t, uint64_t>& runs() const { return runs_; }

 private:
  std::map<uint64_t, uint64_t> runs_;  // begin -> end
};

class PartFiles {
 public:
  PartFiles() = default;
  ~PartFiles();
  PartFiles(const PartFiles&) = delete;
  PartFiles& operator=(const PartFiles&) = delete;

  // `path` is the part file of `file`, `present` the ranges already written
  // in it (none for a new one; those an interrupted pull left, for one it
  // resumes); replaces an earlier one of the same name.
  absl::Status Open(const std::string& file, const std::string& path,
                    RangeSet present = RangeSet());
  // Syncs and forgets the part file of `file`; a no-op if none is open.
  void Close(const std::string& file);
  void CloseAll();

  // The ranges of [offset, offset + length) of `file` not present, gaps
  // merged as RangeSet::Missing does; the whole range if `file` is not
  // open.
  std::vector<RangeSet::Range> Missing(const std::string& file,
                                       uint64_t offset, uint64_t length,
                                       uint64_t min_kept) const;
  // The copy wrote [offset, offset + length) of `file`.
  void MarkPresent(const std::string& file, uint64_t offset, uint64_t length);
  // Missing(), and the ranges it returns are in flight: a Read() of bytes
  // in them waits until Release(). Every claim must be released. Waits
  // first while a claim of ClaimFree (a read bringing a block) overlaps
  // the range: those bytes are on their way (and missing still, to be
  // claimed here, if that read fails).
  std::vector<RangeSet::Range> Claim(const std::string& file, uint64_t offset,
                                     uint64_t length, uint64_t min_kept);
  // The ranges of [offset, offset + length) of `file` neither present nor
  // claimed, claimed now (release them as Claim's); nullopt when `file` is
  // not open. For a reader that brings a whole block into the part file.
  std::optional<std::vector<RangeSet::Range>> ClaimFree(
      const std::string& file, uint64_t offset, uint64_t length);
  // Ends a claim; with `written`, its ranges are present.
  void Release(const std::string& file,
               const std::vector<RangeSet::Range>& ranges, bool written);
  // Writes `bytes` at `offset` into the part file of `file` and marks them
  // present; does nothing if `file` is not open (or the write fails: the
  // copy then fetches them itself). Returns whether they were written.
  bool Write(const std::string& file, uint64_t offset, std::string_view bytes);
  // Bytes [offset, offset + length) of `file` if all are present in its
  // open part file; nullopt otherwise. Waits while a claim of the copy
  // overlaps them (it brings them), unless that claim is more than
  // `wait_for` bytes: then returns nullopt at once (a caller that would
  // fetch a small part of a large piece fetches it rather than wait).
  std::optional<std::string> Read(
      const std::string& file, uint64_t offset, uint64_t length,
      uint64_t wait_for = std::numeric_limits<uint64_t>::max());
  // Calls of Read() and Claim() on `file` inside them now (waiting for a
  // claim, or reading); for tests that must know a call waits.
  int Waiting(const std::string& file) const;

 private:
  struct Part {
    int fd = -1;
    RangeSet present;
    std::vector<RangeSet::Range> claimed;  // In flight; a few at a time.
    int waiters = 0;       // In Read() or Claim(); Close waits for them.
    bool closing = false;  // Close began: reads stop waiting.
  };
  // Marks the part of `file` closing and waits until no Read or Claim waits
  // in it.
  void DrainLocked(const std::string& file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits while `keep_waiting` holds for the open part of `file` and it is
  // not closing, counted among its waiters (so Close waits for it); returns
  // the part, still open.
  Part& AwaitLocked(const std::string& file,
                    absl::FunctionRef<bool(const Part&)> keep_waiting)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The largest claim overlapping [begin, end), in bytes; 0: none.
  static uint64_t ClaimedLocked(const Part& part, uint64_t begin,
                                uint64_t end);
  static void CloseLocked(Part& part);

  mutable absl::Mutex mu_;
  absl::CondVar released_;  // A claim ended, a read left, a file closed.
  absl::flat_hash_map<std::string, Part> parts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_PART_FILES_H_
