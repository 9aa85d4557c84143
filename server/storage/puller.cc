#include "server/storage/puller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/parallel.h"
#include "server/dataset/shard_index.h"
#include "server/dataset/verifier.h"

namespace stoker::storage {

Puller::Puller(Store& source, std::string dest, std::string state,
               const TransferOptions& options, dataset::Manifest manifest,
               Meter* meter)
    : source_(source),
      dest_(std::move(dest)),
      state_(std::move(state)),
      options_(options),
      manifest_(std::move(manifest)),
      meter_(meter) {}

Puller::~Puller() {
  if (options_.parts != nullptr) options_.parts->CloseAll();
}

std::string Puller::PartPath(const std::string& state,
                             const std::string& name) {
  return absl::StrCat(state, "/", name, ".part");
}

std::string Puller::SourceName(const FileJob& f) const {
  return absl::StrCat(source_.Display(), "/", f.name);
}

absl::Status Puller::FetchAll(std::vector<std::unique_ptr<FileJob>>& files) {
  std::vector<Chunk> chunks;
  const uint64_t step = std::max<uint64_t>(options_.chunk_bytes, 1);
  for (auto& f : files) {
    if (absl::Status s = PreparePart(*f); !s.ok()) return s;
    const uint64_t n = f->bytes == 0 ? 1 : (f->bytes + step - 1) / step;
    for (uint64_t c = 0; c < n; ++c) {
      const uint64_t at = c * step;
      chunks.push_back({f.get(), at, std::min(step, f->bytes - at)});
    }
    f->chunks_left = n;
  }
  dataset::ParallelFor(std::max(1, options_.parallel), chunks.size(),
                       [&](uint64_t i) { RunChunk(chunks[i]); });
  absl::MutexLock lock(&mu_);
  return first_error_;
}

absl::Status Puller::PreparePart(FileJob& f) {
  const std::string path = PartPath(f);
  const std::string journal = PartJournal::PathOf(path);
  if (!f.resumed.runs().empty()) {
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Reopen(journal, f.bytes, f.key);
    if (!j.ok()) return j.status();
    f.journal = *std::move(j);
  } else {
    // The journal first: emptied before its part file is, a journal never
    // names ranges of a part file truncated after a kill.
    absl::StatusOr<std::unique_ptr<PartJournal>> j =
        PartJournal::Create(journal, f.bytes, f.key);
    if (!j.ok()) return j.status();
    f.journal = *std::move(j);
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(f.bytes)) != 0) {
      const absl::Status s =
          absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
      if (fd >= 0) ::close(fd);
      return s;
    }
    ::close(fd);
  }
  if (options_.parts != nullptr && f.shard != nullptr) {
    return options_.parts->Open(f.name, path, f.resumed);
  }
  return absl::OkStatus();
}

void Puller::Fail(const absl::Status& s) {
  absl::MutexLock lock(&mu_);
  if (first_error_.ok()) first_error_ = s;
}

bool Puller::Failed() {
  absl::MutexLock lock(&mu_);
  return !first_error_.ok();
}

// Fetches [offset, offset + length) of `f` into its part file; with
// `skip_present`, only the ranges not in it yet: those an interrupted pull
// left (`f.resumed`) and those a ranged read wrote there.
absl::Status Puller::Fetch(FileJob& f, uint64_t offset, uint64_t length,
                           bool skip_present) {
  const std::string path = PartPath(f);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  uint64_t fetched = 0;
  uint64_t refetched = 0;  // Of those, bytes `f.resumed` held already.
  absl::Status s;
  const auto get = [&](uint64_t begin, uint64_t end) {
    s = source_.ReadToFile(f.name, begin, end - begin, fd, begin,
                           [this](uint64_t k) { meter_->Add(k); });
    if (!s.ok()) return false;
    fetched += end - begin;
    refetched += f.resumed.bytes(begin, end);
    return true;
  };
  if (skip_present && options_.parts != nullptr) {
    // In pieces, each claimed while in flight (part_files.h), so that a
    // ranged read may wait for a piece rather than fetch its bytes again.
    const uint64_t piece = std::max<uint64_t>(options_.piece_bytes, 1);
    for (uint64_t at = offset; s.ok() && at < offset + length; at += piece) {
      const uint64_t n = std::min(piece, offset + length - at);
      const std::vector<dataset::RangeSet::Range> ranges =
          options_.parts->Claim(f.name, at, n, options_.min_kept_bytes);
      for (const auto& [begin, end] : ranges) {
        if (!get(begin, end)) break;
      }
      options_.parts->Release(f.name, ranges, s.ok());
    }
  } else if (skip_present) {
    for (const auto& [begin, end] :
         f.resumed.Missing(offset, offset + length, options_.min_kept_bytes)) {
      if (!get(begin, end)) break;
    }
  } else if (length > 0) {
    get(offset, offset + length);
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot sync ", path));
  }
  ::close(fd);
  if (!s.ok()) return s;
  // The whole range is on disk now: the bytes fetched here, those a ranged
  // read wrote before (fsync syncs every write to the file, whichever
  // descriptor made it) and those the journal named already. A journal
  // that cannot take the line only costs a refetch after a kill.
  if (f.journal != nullptr) (void)f.journal->Add(offset, offset + length);
  // Resumed bytes were counted as done at the start; those fetched again
  // (a present run too short to keep out of a GET) were counted twice.
  const uint64_t resumed = f.resumed.bytes(offset, offset + length);
  meter_->Retract(refetched);
  meter_->Skip(length - fetched - (resumed - refetched));
  return absl::OkStatus();
}

void Puller::RunChunk(const Chunk& c) {
  if (Failed()) return;
  if (options_.cancelled && options_.cancelled()) {
    Fail(absl::CancelledError(
        absl::StrCat("the pull into ", dest_, " was stopped")));
    return;
  }
  if (absl::Status s = Fetch(*c.file, c.offset, c.length, true); !s.ok()) {
    Fail(s);
    return;
  }
  if (--c.file->chunks_left == 0) {
    if (absl::Status s = Finish(*c.file); !s.ok()) Fail(s);
  }
}

// Why the part file of `f` is not the file the manifest describes; OK if
// it is.
absl::Status Puller::Check(const FileJob& f) {
  if (!f.digest.empty()) {
    absl::StatusOr<std::string> got = dataset::FileDigest(PartPath(f));
    if (!got.ok()) return got.status();
    if (*got == f.digest) return absl::OkStatus();
    return absl::DataLossError(
        absl::StrCat("digest is ", *got, ", the manifest says ", f.digest));
  }
  dataset::ShardInfo copy = *f.shard;
  copy.file = absl::StrCat(f.name, ".part");
  const dataset::VerifyReport r = dataset::VerifyShard(state_, manifest_, copy);
  if (r.errors.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      r.errors.size(), " bad record(s), the first: ", r.errors.front()));
}

// Checks the complete part file, fetching it once more if it is bad, and
// publishes it. Runs once every chunk of `f` is in: no other thread uses
// `f` any more.
absl::Status Puller::Finish(FileJob& f) {
  // No ranged read writes into it from here on.
  if (options_.parts != nullptr) options_.parts->Close(f.name);
  absl::Status bad = Check(f);
  if (!bad.ok() && !absl::IsDataLoss(bad)) return bad;
  if (!bad.ok()) {
    Notice(absl::StrCat(f.name, " from ", SourceName(f), ": ", bad.message(),
                        "; fetching it again"));
    meter_->Retract(f.bytes);
    // Nothing of the bad copy is kept, by this pull or a resumed one.
    f.resumed = dataset::RangeSet();
    if (absl::Status s = f.journal->Reset(); !s.ok()) return s;
    if (absl::Status s = Fetch(f, 0, f.bytes, false); !s.ok()) return s;
    bad = Check(f);
    if (!bad.ok()) {
      return absl::DataLossError(absl::StrCat(
          f.shard != nullptr ? "shard " : "record index ", f.name, " from ",
          SourceName(f), ": ", bad.message(), " (fetched twice)"));
    }
  }
  const std::string to = absl::StrCat(dest_, "/", f.name);
  if (::rename(PartPath(f).c_str(), to.c_str()) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot rename ", PartPath(f), " to ", to));
  }
  // A journal left by a kill here names no part file: the next pull finds
  // the file published and does not look for one.
  f.journal.reset();
  std::error_code ec;
  std::filesystem::remove(PartJournal::PathOf(PartPath(f)), ec);
  meter_->FileDone();
  Published(f.name);
  return absl::OkStatus();
}

void Puller::Notice(const std::string& line) {
  absl::MutexLock lock(&mu_);
  if (options_.notice) options_.notice(line);
}

void Puller::Published(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (options_.on_published) options_.on_published(name);
}

}  // namespace stoker::storage
