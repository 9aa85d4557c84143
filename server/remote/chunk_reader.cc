#include "server/remote/chunk_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/base/clock.h"
#include "server/tensor/dtype.h"

namespace stoker::remote {
namespace {

// The client's view of a batch as the service's plain RemoteBatch.
absl::StatusOr<service::RemoteBatch> ToRemote(const Batch& batch,
                                              bool rendered) {
  service::RemoteBatch out;
  out.rendered = rendered;
  out.epoch = batch.epoch();
  out.step = batch.step();
  out.sample_ids = batch.sample_ids();
  out.skipped_ids = batch.skipped_ids();
  out.sample_reps = batch.sample_reps();
  out.skipped_reps = batch.skipped_reps();
  for (const TensorView& t : batch.tensors()) {
    std::optional<tensor::DType> dtype =
        tensor::DTypeFromName(DTypeName(t.dtype));
    if (!dtype) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor '", t.name, "' has a dtype this build lacks"));
    }
    out.tensors.push_back({t.name, *dtype, t.shape, t.data, t.size});
  }
  return out;
}

}  // namespace

ChunkReader::ChunkReader(Client* client, HelperCounters* counters,
                         StreamOptions options, uint64_t begin, uint64_t end,
                         std::weak_ptr<service::ChunkSink> sink,
                         std::function<void(bool)> on_batch,
                         std::function<void(const Result&)> on_end)
    : client_(client),
      counters_(counters),
      options_(std::move(options)),
      begin_(begin),
      end_(end),
      sink_(std::move(sink)),
      on_batch_(std::move(on_batch)),
      on_end_(std::move(on_end)) {
  last_progress_ns_ = NowNs();
}

ChunkReader::~ChunkReader() {
  Cancel();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    // The thread's own reference was the last: Run has returned and
    // nothing touches this object after it.
    thread_.detach();
  } else {
    thread_.join();
  }
}

void ChunkReader::Start() {
  thread_ = std::thread([self = shared_from_this()] { self->Run(); });
}

void ChunkReader::Join() {
  if (thread_.joinable()) thread_.join();
}

void ChunkReader::Cancel() {
  cancelled_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ != nullptr) stream_->Interrupt();
}

void ChunkReader::GiveUp(absl::Status reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.ok()) reason_ = std::move(reason);
  }
  Cancel();
}

bool ChunkReader::StalledFor(int64_t now_ns, int64_t ns) const {
  return !in_sink_ && now_ns - last_progress_ns_ > ns;
}

void ChunkReader::Run() {
  Result result = Read();
  // After the last write: the node stream builds the rest itself.
  if (std::shared_ptr<service::ChunkSink> sink = sink_.lock()) {
    sink->ChunkEnded(begin_);
  }
  on_end_(result);
  finished_ = true;
}

ChunkReader::Result ChunkReader::Read() {
  Result result;
  std::unique_ptr<Stream> stream = client_->NewStream(options_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = stream.get();
    // A Cancel before this point found no stream to interrupt.
    if (cancelled_) stream_->Interrupt();
  }
  // A helper that accepts and never answers is interrupted by a stall.
  if (absl::Status s = stream->Start(); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    result.status = !reason_.ok()  ? reason_
                    : cancelled_   ? absl::CancelledError("chunk cancelled")
                                   : s;
    result.undelivered = end_ - begin_;
    return result;
  }
  last_progress_ns_ = NowNs();
  Batch batch;
  uint64_t pos = begin_;
  while (pos < end_) {
    const int64_t asked = NowNs();
    absl::Status s = stream->Next(&batch);
    counters_->wait_ns += NowNs() - asked;
    if (!s.ok()) {
      result.status = absl::IsOutOfRange(s)
                          ? absl::DataLossError(absl::StrCat(
                                "the helper's stream ended at position ", pos,
                                " of a chunk that ends at ", end_))
                          : s;
      break;
    }
    last_progress_ns_ = NowNs();
    std::shared_ptr<service::ChunkSink> sink = sink_.lock();
    if (sink == nullptr) {
      result.status = absl::CancelledError("the node stream is gone");
      break;
    }
    absl::StatusOr<service::RemoteBatch> remote =
        ToRemote(batch, options_.raw);
    if (!remote.ok()) {
      result.status = remote.status();
      break;
    }
    in_sink_ = true;
    service::TakeReport report;
    absl::Status taken = sink->TakeRemote(begin_, pos, *remote, &report);
    last_progress_ns_ = NowNs();
    in_sink_ = false;
    counters_->copy_ns += report.copy_ns;
    if (!taken.ok()) {
      result.status = taken;
      // The stream takes no batch that skipped samples (Stream::TakeRemote).
      result.skipped = !remote->skipped_ids.empty();
      break;
    }
    on_batch_(report.late);
    counters_->batches += 1;
    counters_->samples += batch.sample_ids().size();
    counters_->wire_bytes += batch.wire_bytes();
    counters_->payload_bytes += batch.payload_bytes();
    ++result.delivered;
    ++pos;
  }
  result.undelivered = end_ - begin_ - result.delivered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    if (!reason_.ok()) {
      result.status = reason_;
    } else if (cancelled_ && result.undelivered > 0) {
      // Cancel() interrupted the read, which then failed however the
      // interrupted call says: the node gave up the chunk, not the helper.
      result.status = absl::CancelledError("chunk cancelled");
    }
  }
  stream->Cancel();
  return result;
}

}  // namespace stoker::remote
