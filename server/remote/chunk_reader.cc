#include "server/remote/chunk_reader.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/tensor/dtype.h"

namespace stoker::remote {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The client's view of a batch as the service's plain RemoteBatch.
absl::StatusOr<service::RemoteBatch> ToRemote(const Batch& batch) {
  service::RemoteBatch out;
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

ChunkReader::ChunkReader(Client* client, StreamOptions options, uint64_t begin,
                         uint64_t end, std::weak_ptr<service::ChunkSink> sink,
                         std::function<void(const Result&)> on_end)
    : client_(client),
      options_(std::move(options)),
      begin_(begin),
      end_(end),
      sink_(std::move(sink)),
      on_end_(std::move(on_end)) {
  last_progress_ns_ = NowNs();
}

ChunkReader::~ChunkReader() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

void ChunkReader::Start() {
  thread_ = std::thread([this] { Run(); });
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
    result.status = reason_.ok() ? s : reason_;
    return result;
  }
  last_progress_ns_ = NowNs();
  Batch batch;
  uint64_t pos = begin_;
  while (pos < end_) {
    absl::Status s = stream->Next(&batch);
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
    absl::StatusOr<service::RemoteBatch> remote = ToRemote(batch);
    if (!remote.ok()) {
      result.status = remote.status();
      break;
    }
    in_sink_ = true;
    absl::Status taken = sink->TakeRemote(begin_, pos, *remote);
    last_progress_ns_ = NowNs();
    in_sink_ = false;
    if (!taken.ok()) {
      result.status = taken;
      break;
    }
    ++result.delivered;
    ++pos;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    if (!reason_.ok()) result.status = reason_;
  }
  stream->Cancel();
  if (result.status.ok() && cancelled_) {
    result.status = absl::CancelledError("chunk cancelled");
  }
  return result;
}

}  // namespace stoker::remote
