// Push (transfer.h): a local dataset into a Store, manifest last.
#include <atomic>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/dataset/file_util.h"
#include "server/dataset/parallel.h"
#include "server/storage/transfer.h"
#include "server/storage/transfer_util.h"

namespace stoker::storage {

absl::StatusOr<TransferReport> Push(const std::string& dir, Store& dest,
                                    const TransferOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string manifest_path =
      absl::StrCat(dir, "/", dataset::kManifestFile);
  std::string text;
  if (absl::Status s = dataset::ReadFileToString(manifest_path, &text);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(manifest_path, ": ", s.message(),
                                               " (not a dataset)"));
  }
  absl::StatusOr<dataset::Manifest> manifest =
      dataset::ParseManifest(text, manifest_path);
  if (!manifest.ok()) return manifest.status();

  absl::StatusOr<uint64_t> there = dest.Stat(dataset::kManifestFile);
  if (there.ok()) {
    absl::StatusOr<std::string> theirs =
        dest.Read(dataset::kManifestFile, 0, 0);
    if (!theirs.ok()) return theirs.status();
    if (*theirs != text && !options.force) {
      return absl::FailedPreconditionError(absl::StrCat(
          dest.Display(),
          " holds another dataset; pass --force to replace "
          "it (readers of the old one may fail while it is replaced)"));
    }
  } else if (!absl::IsNotFound(there.status())) {
    return there.status();
  }

  // Each shard, then its index.
  struct File {
    std::string name;
    uint64_t bytes;
  };
  std::vector<File> files;
  TransferProgress initial;
  for (const dataset::ShardInfo& s : manifest->shards) {
    files.push_back({s.file, s.bytes});
    if (s.has_index()) files.push_back({s.index_file, s.index_bytes});
  }
  for (const File& f : files) initial.bytes_total += f.bytes;
  initial.files_total = files.size();
  Meter meter(options.progress, initial);
  absl::Mutex mu;
  absl::Status first_error;
  std::atomic<bool> failed{false};
  dataset::ParallelFor(
      std::max(1, options.parallel), files.size(), [&](uint64_t i) {
        if (failed) return;
        absl::Status s =
            dest.PutFile(files[i].name, absl::StrCat(dir, "/", files[i].name),
                         [&](uint64_t n) { meter.Add(n); });
        if (!s.ok()) {
          failed = true;
          absl::MutexLock lock(&mu);
          if (first_error.ok()) first_error = s;
          return;
        }
        meter.FileDone();
      });
  if (failed) {
    absl::MutexLock lock(&mu);
    return first_error;
  }
  if (absl::Status s = dest.Put(dataset::kManifestFile, text); !s.ok()) {
    return s;
  }
  TransferReport report;
  report.manifest = *std::move(manifest);
  report.bytes_moved = meter.moved();
  report.files_moved = files.size();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace stoker::storage
