// Dataset's staging half: opening a dataset whose shards are not all local
// yet, reading their records from the source, and switching a shard to its
// local file once it is published (dataset.h).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/dataset.h"
#include "server/dataset/shard_index.h"

namespace stoker::dataset {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadLocalFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

// The record index of `info`, from `dir` or `source`, checked against the
// manifest entry.
absl::StatusOr<ShardIndex> LoadIndex(const std::string& dir,
                                     const ShardInfo& info,
                                     RangeSource& source) {
  const std::string local = absl::StrCat(dir, "/", info.index_file);
  absl::StatusOr<std::string> bytes =
      FileExists(local) ? ReadLocalFile(local)
      : info.index_bytes == 0
          ? absl::StatusOr<std::string>(std::string())
          : source.Read(info.index_file, 0, info.index_bytes);
  if (!bytes.ok()) return bytes.status();
  const std::string where =
      FileExists(local) ? local : source.Url(info.index_file);
  if (!info.index_digest.empty() && BytesDigest(*bytes) != info.index_digest) {
    return absl::DataLossError(absl::StrCat(
        "record index ", where, ": digest is ", BytesDigest(*bytes),
        ", the manifest says ", info.index_digest));
  }
  absl::StatusOr<ShardIndex> index = ParseShardIndex(*bytes, where);
  if (!index.ok()) return index.status();
  if (index->first_id != info.first_id ||
      index->records.size() != info.num_samples) {
    return absl::DataLossError(absl::StrCat(
        "record index ", where, " lists ids ", index->first_id, " + ",
        index->records.size(), ", the manifest says shard ", info.file,
        " holds ", info.first_id, " + ", info.num_samples));
  }
  for (const RecordRange& r : index->records) {
    if (r.length == 0 || r.offset > info.bytes ||
        r.length > info.bytes - r.offset) {
      return absl::DataLossError(
          absl::StrCat("record index ", where, " has a range outside ",
                       info.file, " (", info.bytes, " bytes)"));
    }
  }
  return index;
}

// Opens the local shard `info` of `dir`, checked as Open checks it.
absl::StatusOr<ReadOnlyShard> OpenLocal(const std::string& dir,
                                        const ShardInfo& info) {
  absl::StatusOr<ReadOnlyShard> shard =
      OpenShardForRead(absl::StrCat(dir, "/", info.file), info.bytes);
  if (!shard.ok()) return shard.status();
  if (shard->entries != info.num_samples) {
    return absl::DataLossError(absl::StrCat("shard ", info.file, " holds ",
                                            shard->entries,
                                            " records, the manifest says ",
                                            info.num_samples));
  }
  return shard;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::OpenStaging(
    std::string name, std::string dir, Manifest manifest,
    std::unique_ptr<RangeSource> source, const RemoteOptions& options) {
  const std::string prefix = absl::StrCat("dataset '", name, "': ");
  const auto prefixed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
  };
  std::vector<ReadOnlyShard> shards(manifest.shards.size());
  std::vector<std::optional<ShardIndex>> indexes(manifest.shards.size());
  size_t remote = 0;
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    const ShardInfo& info = manifest.shards[i];
    if (FileExists(absl::StrCat(dir, "/", info.file))) {
      absl::StatusOr<ReadOnlyShard> shard = OpenLocal(dir, info);
      if (!shard.ok()) return prefixed(shard.status());
      shards[i] = *std::move(shard);
      continue;
    }
    if (!info.has_index()) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, "shard ", info.file,
          " has no record index (packed before indexes): the dataset is "
          "served once its copy is complete"));
    }
    absl::StatusOr<ShardIndex> index = LoadIndex(dir, info, *source);
    if (!index.ok()) return prefixed(index.status());
    indexes[i] = *std::move(index);
    ++remote;
  }
  std::unique_ptr<Dataset> ds(new Dataset(std::move(name), std::move(dir),
                                          std::move(manifest),
                                          std::move(shards)));
  for (size_t i = 0; i < indexes.size(); ++i) {
    if (indexes[i].has_value()) ds->local_[i] = false;
  }
  ds->remote_shards_ = remote;
  if (remote > 0) {
    ds->remote_ = std::make_unique<RemoteRecords>(
        ds->name_, &ds->manifest_, std::move(indexes), std::move(source),
        options);
  }
  return ds;
}

absl::Status Dataset::PublishShard(const std::string& file) {
  size_t shard = 0;
  while (shard < manifest_.shards.size() &&
         manifest_.shards[shard].file != file) {
    ++shard;
  }
  if (shard == manifest_.shards.size()) return absl::OkStatus();
  absl::MutexLock lock(&publish_mu_);
  if (local_[shard].load(std::memory_order_acquire)) return absl::OkStatus();
  absl::StatusOr<ReadOnlyShard> opened = OpenLocal(dir_, manifest_.shards[shard]);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("dataset '", name_, "': ",
                                     opened.status().message()));
  }
  shards_[shard] = *std::move(opened);
  local_[shard].store(true, std::memory_order_release);
  remote_shards_.fetch_sub(1, std::memory_order_acq_rel);
  remote_->Drop(shard);
  return absl::OkStatus();
}

absl::Status Dataset::ReadRemote(
    size_t shard, uint64_t id,
    absl::FunctionRef<absl::Status(const RecordView&)> fn,
    ReadInfo* info) const {
  absl::StatusOr<RemoteRecord> record = remote_->Get(shard, id);
  if (!record.ok() && local_[shard].load(std::memory_order_acquire)) {
    // The shard was published while this read waited: it is local now.
    return Read(id, fn, info);
  }
  if (!record.ok()) {
    // A record that failed its check twice is a bad record, as a local one
    // would be; anything else is the source failing.
    absl::Status error = Annotate(record.status(), shard, id);
    return absl::IsDataLoss(error) ? error : MarkSourceFailure(error);
  }
  if (info != nullptr) {
    info->from_source = true;
    info->bytes = record->value->size();
    info->wait_ns = record->wait_ns;
  }
  return Deliver(*record->value, shard, id, fn);
}

void Dataset::Prefetch(absl::Span<const uint64_t> ids, bool urgent) const {
  if (staging()) remote_->Prefetch(ids, urgent);
}

uint32_t Dataset::prefetch_batches() const {
  return remote_ != nullptr ? remote_->options().ahead_batches : 0;
}

RemoteReadStats Dataset::remote_stats() const {
  return remote_ != nullptr ? remote_->stats() : RemoteReadStats{};
}

}  // namespace stoker::dataset
