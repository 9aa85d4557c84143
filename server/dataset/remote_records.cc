#include "server/dataset/remote_records.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// For each record of each shard, where a GET of it begins when the bytes
// fetched are kept for the copy: the end of the record before it in the
// file (the bytes between are the store's own, a few dozen to a few
// thousand), unless more than `max_gap` bytes lie between. Records read by
// range then cover the file without holes between them, and a chunk of the
// copy whose records were all read needs no request.
std::vector<std::vector<uint64_t>> SpanBegins(
    const std::vector<std::optional<ShardIndex>>& indexes, uint64_t max_gap) {
  std::vector<std::vector<uint64_t>> out(indexes.size());
  for (size_t s = 0; s < indexes.size(); ++s) {
    if (!indexes[s].has_value()) continue;
    const std::vector<RecordRange>& records = indexes[s]->records;
    std::vector<uint32_t> order(records.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return records[a].offset < records[b].offset;
    });
    out[s].resize(records.size());
    uint64_t end = 0;  // Of the records before, in file order.
    for (uint32_t i : order) {
      const RecordRange& r = records[i];
      out[s][i] = r.offset >= end && r.offset - end <= max_gap ? end : r.offset;
      end = std::max(end, r.offset + r.length);
    }
  }
  return out;
}

}  // namespace

RemoteRecords::RemoteRecords(std::string name, const Manifest* manifest,
                             std::vector<std::optional<ShardIndex>> indexes,
                             std::unique_ptr<RangeSource> source,
                             const RemoteOptions& options)
    : name_(std::move(name)),
      manifest_(manifest),
      indexes_(std::move(indexes)),
      source_(std::move(source)),
      options_(options),
      dropped_(new std::atomic<bool>[indexes_.size()]),
      span_begins_(options_.parts == nullptr
                       ? std::vector<std::vector<uint64_t>>()
                       : SpanBegins(indexes_, options_.max_gap)) {
  for (size_t i = 0; i < indexes_.size(); ++i) {
    dropped_[i] = !indexes_[i].has_value();
  }
  const int threads = std::max(1, options_.parallel);
  fetchers_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    fetchers_.emplace_back([this] { FetcherLoop(); });
  }
}

RemoteRecords::~RemoteRecords() { Stop(); }

void RemoteRecords::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (const Job& job : jobs_) {
      for (uint64_t id : job.ids) {
        queued_bytes_ -= in_flight_[id];
        in_flight_.erase(id);
      }
    }
    jobs_.clear();
    queued_.SignalAll();
    fetched_.SignalAll();
  }
  for (std::thread& t : fetchers_) t.join();
}

size_t RemoteRecords::ShardOf(uint64_t id) const {
  const auto it = std::upper_bound(
      manifest_->shards.begin(), manifest_->shards.end(), id,
      [](uint64_t v, const ShardInfo& s) { return v < s.first_id; });
  return (it - manifest_->shards.begin()) - 1;
}

const RecordRange& RemoteRecords::RangeOf(size_t shard, uint64_t id) const {
  const ShardIndex& index = *indexes_[shard];
  return index.records[id - index.first_id];
}

absl::StatusOr<RemoteRecord> RemoteRecords::Get(size_t shard, uint64_t id) {
  const int64_t start = NowNs();
  {
    absl::MutexLock lock(&mu_);
    bool joined = false;
    for (;;) {
      // Published while this read waited for a fetch in flight (which then
      // ended without a value): the caller reads the local file.
      if (dropped_[shard].load(std::memory_order_acquire)) {
        return absl::CancelledError(
            absl::StrCat("shard ", manifest_->shards[shard].file,
                         " was published; read it locally"));
      }
      auto it = cache_.find(id);
      if (it != cache_.end()) {
        if (!it->second.error.ok()) {
          absl::Status error = std::move(it->second.error);
          cache_.erase(it);
          return error;
        }
        ++stats_.records;
        return RemoteRecord{it->second.value, NowNs() - start};
      }
      if (!in_flight_.contains(id)) break;
      if (!joined) ++stats_.joined;
      joined = true;
      fetched_.Wait(&mu_);
    }
    in_flight_[id] = 0;
  }
  absl::StatusOr<std::shared_ptr<const std::string>> value =
      FetchOne(shard, id, 2, /*local=*/true);
  absl::MutexLock lock(&mu_);
  FinishLocked(shard, id, value, /*keep_error=*/false);
  if (!value.ok()) return value.status();
  ++stats_.records;
  return RemoteRecord{*std::move(value), NowNs() - start};
}

void RemoteRecords::Prefetch(absl::Span<const uint64_t> ids, bool urgent) {
  std::vector<std::pair<size_t, uint64_t>> wanted;  // (shard, id)
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  // Fetches queued ahead hold at most half the cache, so that what they
  // bring in does not push out records not read yet.
  const uint64_t queue_bound = options_.cache_bytes / 2;
  for (uint64_t id : ids) {
    if (id >= manifest_->num_samples) continue;
    const size_t shard = ShardOf(id);
    if (dropped_[shard].load(std::memory_order_acquire)) continue;
    if (cache_.contains(id) || in_flight_.contains(id)) continue;
    const uint64_t length = RangeOf(shard, id).length;
    if (queued_bytes_ + length > queue_bound && queued_bytes_ > 0) break;
    in_flight_[id] = length;
    queued_bytes_ += length;
    wanted.emplace_back(shard, id);
  }
  if (wanted.empty()) return;
  const size_t before = jobs_.size();
  std::sort(wanted.begin(), wanted.end(),
            [this](const auto& a, const auto& b) {
              if (a.first != b.first) return a.first < b.first;
              return RangeOf(a.first, a.second).offset <
                     RangeOf(b.first, b.second).offset;
            });
  const uint64_t block =
      options_.parts != nullptr && !urgent ? options_.block_bytes : 0;
  Job job;
  for (const auto& [shard, id] : wanted) {
    const RecordRange& r = RangeOf(shard, id);
    uint64_t begin = SpanBegin(shard, id);
    uint64_t end = r.offset + r.length;
    if (block > 0) {
      begin -= begin % block;
      end = std::min(manifest_->shards[shard].bytes,
                     (end + block - 1) / block * block);
    }
    const bool joins = !job.ids.empty() && job.shard == shard &&
                       begin <= job.offset + job.length + options_.max_gap &&
                       end - job.offset <= options_.max_request;
    if (!joins) {
      if (!job.ids.empty()) jobs_.push_back(std::move(job));
      job = Job{shard, begin, end - begin, {}, block > 0};
    }
    job.length = std::max(job.length, end - job.offset);
    job.ids.push_back(id);
  }
  jobs_.push_back(std::move(job));
  // One fetcher per job: waking them all for each would cost a context
  // switch of every idle fetcher per job.
  for (size_t i = before; i < jobs_.size(); ++i) queued_.Signal();
}

void RemoteRecords::FetcherLoop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && jobs_.empty()) queued_.Wait(&mu_);
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    RunJob(job);
  }
}

void RemoteRecords::RunJob(const Job& job) {
  std::vector<absl::StatusOr<std::shared_ptr<const std::string>>> values(
      job.ids.size(), absl::CancelledError("published"));
  if (dropped_[job.shard].load(std::memory_order_acquire)) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < job.ids.size(); ++i) {
      FinishLocked(job.shard, job.ids[i], values[i], /*keep_error=*/true);
    }
    return;
  }
  if (job.block) FetchBlock(job);
  // Records the copy already wrote are read from its part file; the GET
  // is sent only if some are not there.
  std::vector<size_t> remote;
  for (size_t i = 0; i < job.ids.size(); ++i) {
    const RecordRange& r = RangeOf(job.shard, job.ids[i]);
    std::optional<std::string> kept =
        Kept(job.shard, r.offset, r.length, job.length);
    if (kept.has_value() && DecodeRecord(*kept).ok()) {
      values[i] = std::make_shared<const std::string>(*std::move(kept));
    } else {
      remote.push_back(i);
    }
  }
  if (job.block) {
    // Not in the part file after the block's fetch (it failed, or a bad
    // byte): each record by itself, checked and fetched twice at most.
    for (size_t i : remote) {
      values[i] = FetchOne(job.shard, job.ids[i], 2, /*local=*/false);
    }
  } else if (!remote.empty()) {
    absl::StatusOr<std::string> bytes =
        Fetch(job.shard, job.offset, job.length);
    for (size_t i : remote) {
      const uint64_t id = job.ids[i];
      if (!bytes.ok()) {
        values[i] = bytes.status();
        continue;
      }
      const RecordRange& r = RangeOf(job.shard, id);
      const uint64_t at = r.offset - job.offset;
      if (at + r.length <= bytes->size()) {
        std::string_view value(bytes->data() + at, r.length);
        if (DecodeRecord(value).ok()) {
          values[i] = std::make_shared<const std::string>(value);
          continue;
        }
      }
      // Short or failing its check: one more fetch, of this record alone.
      {
        absl::MutexLock lock(&mu_);
        ++stats_.refetches;
      }
      values[i] = FetchOne(job.shard, id, 1, /*local=*/false);
    }
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < job.ids.size(); ++i) {
    FinishLocked(job.shard, job.ids[i], values[i], /*keep_error=*/true);
  }
  // A kept error shares its payload with `values`: dropped here, under
  // the lock a Get takes it under, its reference count never races with
  // the reader's (ThreadSanitizer cannot see the count's atomics in the
  // uninstrumented absl library).
  values.clear();
}

void RemoteRecords::FetchBlock(const Job& job) {
  const std::string& file = manifest_->shards[job.shard].file;
  std::optional<std::vector<RangeSet::Range>> ranges =
      options_.parts->ClaimFree(file, job.offset, job.length);
  if (!ranges.has_value()) return;
  for (const auto& [begin, end] : *ranges) {
    // Fetch writes what came into the part file and marks it present.
    if (!Fetch(job.shard, begin, end - begin).ok()) break;
  }
  // Unwritten: only what Fetch wrote is present (a short answer leaves
  // the rest missing, for the copy).
  options_.parts->Release(file, *ranges, /*written=*/false);
}

absl::StatusOr<std::shared_ptr<const std::string>> RemoteRecords::FetchOne(
    size_t shard, uint64_t id, int tries, bool local) {
  const RecordRange& r = RangeOf(shard, id);
  if (local) {
    const uint64_t fetch = r.offset + r.length - SpanBegin(shard, id);
    std::optional<std::string> kept = Kept(shard, r.offset, r.length, fetch);
    if (kept.has_value() && DecodeRecord(*kept).ok()) {
      return std::make_shared<const std::string>(*std::move(kept));
    }
  }
  // From the source: the record with the bytes before it (SpanBegin).
  const uint64_t begin = SpanBegin(shard, id);
  const uint64_t length = r.offset + r.length - begin;
  absl::Status check;
  for (int attempt = 0; attempt < tries; ++attempt) {
    if (attempt > 0) {
      absl::MutexLock lock(&mu_);
      ++stats_.refetches;
    }
    absl::StatusOr<std::string> bytes = Fetch(shard, begin, length);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() != length) {
      check = absl::DataLossError(absl::StrCat(
          "the source returned ", bytes->size(), " bytes, not ", length));
      continue;
    }
    bytes->erase(0, r.offset - begin);
    check = DecodeRecord(*bytes).status();
    if (check.ok()) return std::make_shared<const std::string>(*std::move(bytes));
  }
  return BadRecord(shard, id, check);
}

absl::Status RemoteRecords::BadRecord(size_t shard, uint64_t id,
                                      const absl::Status& check) const {
  const RecordRange& r = RangeOf(shard, id);
  return absl::DataLossError(absl::StrCat(
      check.message(), " in bytes ", r.offset, "-", r.offset + r.length - 1,
      " of ", source_->Url(manifest_->shards[shard].file),
      " (read twice; record ", id, ")"));
}

std::optional<std::string> RemoteRecords::Kept(size_t shard, uint64_t offset,
                                               uint64_t length,
                                               uint64_t fetch_bytes) {
  if (options_.parts == nullptr) return std::nullopt;
  // A piece the copy has in flight shares the link with every other GET:
  // waiting for one much larger than what this read would fetch itself
  // costs more (seconds on a slow link) than fetching those bytes twice.
  std::optional<std::string> kept =
      options_.parts->Read(manifest_->shards[shard].file, offset, length,
                           kWaitForPieceFactor * fetch_bytes);
  if (kept.has_value()) {
    absl::MutexLock lock(&mu_);
    stats_.local_bytes += kept->size();
  }
  return kept;
}

uint64_t RemoteRecords::SpanBegin(size_t shard, uint64_t id) const {
  if (span_begins_.empty()) return RangeOf(shard, id).offset;
  return span_begins_[shard][id - indexes_[shard]->first_id];
}

absl::StatusOr<std::string> RemoteRecords::Fetch(size_t shard, uint64_t offset,
                                                 uint64_t length) {
  const std::string& file = manifest_->shards[shard].file;
  PartFiles* const parts = options_.parts.get();
  const int64_t start = NowNs();
  absl::StatusOr<std::string> bytes = source_->Read(file, offset, length);
  const int64_t took = NowNs() - start;
  // For the copy: these bytes need not cross the link again. Unchecked
  // bytes between records too; the copy checks the whole file's digest.
  if (parts != nullptr && bytes.ok()) parts->Write(file, offset, *bytes);
  absl::MutexLock lock(&mu_);
  ++stats_.requests;
  stats_.request_ns += took;
  if (bytes.ok()) {
    stats_.bytes += bytes->size();
  } else {
    ++stats_.errors;
  }
  return bytes;
}

void RemoteRecords::FinishLocked(
    size_t shard, uint64_t id,
    const absl::StatusOr<std::shared_ptr<const std::string>>& value,
    bool keep_error) {
  if (auto it = in_flight_.find(id); it != in_flight_.end()) {
    queued_bytes_ -= it->second;
    in_flight_.erase(it);
  }
  fetched_.SignalAll();
  if (dropped_[shard].load(std::memory_order_acquire)) return;
  if (!value.ok()) {
    if (keep_error && absl::IsDataLoss(value.status())) {
      ++stats_.errors;
      cache_[id] = Entry{nullptr, value.status(), 0};
    }
    return;
  }
  const uint64_t seq = next_seq_++;
  Entry& entry = cache_[id];
  if (entry.value != nullptr) cached_bytes_ -= entry.value->size();
  entry = Entry{*value, absl::OkStatus(), seq};
  cached_bytes_ += (*value)->size();
  order_.emplace_back(id, seq);
  EvictLocked();
}

void RemoteRecords::EvictLocked() {
  while (cached_bytes_ > options_.cache_bytes && !order_.empty()) {
    const auto [id, seq] = order_.front();
    order_.pop_front();
    auto it = cache_.find(id);
    if (it == cache_.end() || it->second.seq != seq ||
        it->second.value == nullptr) {
      continue;
    }
    cached_bytes_ -= it->second.value->size();
    cache_.erase(it);
  }
}

void RemoteRecords::Drop(size_t shard) {
  dropped_[shard].store(true, std::memory_order_release);
  const ShardInfo& info = manifest_->shards[shard];
  const auto in_shard = [&](uint64_t id) {
    return id >= info.first_id && id - info.first_id < info.num_samples;
  };
  absl::MutexLock lock(&mu_);
  absl::erase_if(cache_, [&](const auto& kv) {
    if (!in_shard(kv.first)) return false;
    if (kv.second.value != nullptr) cached_bytes_ -= kv.second.value->size();
    return true;
  });
  std::deque<std::pair<uint64_t, uint64_t>> kept;
  for (const auto& e : order_) {
    if (!in_shard(e.first)) kept.push_back(e);
  }
  order_.swap(kept);
  std::deque<Job> jobs;
  for (Job& job : jobs_) {
    if (job.shard != shard) {
      jobs.push_back(std::move(job));
      continue;
    }
    for (uint64_t id : job.ids) {
      queued_bytes_ -= in_flight_[id];
      in_flight_.erase(id);
    }
  }
  jobs_.swap(jobs);
  fetched_.SignalAll();
}

RemoteReadStats RemoteRecords::stats() const {
  absl::MutexLock lock(&mu_);
  RemoteReadStats out = stats_;
  out.cached_bytes = cached_bytes_;
  return out;
}

}  // namespace stoker::dataset
