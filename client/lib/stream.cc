// Stream and Batch: one stream's protocol (open with transport fallback,
// reconnect and resume, acks) over a Stream::Call (stream_call.h).
#include "stoker/client.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/lib/internal.h"
#include "client/lib/staging_watch.h"
#include "client/lib/stream_call.h"
#include "client/lib/transport.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

// The status of a call this client did not cancel. CANCELLED can only have
// come from the other side: a daemon that stops cancels the calls still
// open when its grace period ends, and one that is shutting down cancels
// the new calls that reach it on a connection it has not closed yet. Both
// mean "the daemon is going away", which a reconnect rides out.
absl::Status NotCancelledByUs(absl::Status s) {
  if (s.code() != absl::StatusCode::kCancelled) return s;
  return absl::UnavailableError(absl::StrCat(
      "the daemon cancelled the call (it is stopping): ", s.message()));
}

}  // namespace

Batch::Batch() = default;
Batch::~Batch() = default;
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&&) noexcept = default;

uint64_t Batch::epoch() const {
  return message_ ? message_->response.batch().epoch() : 0;
}

uint64_t Batch::step() const {
  return message_ ? message_->response.batch().step() : 0;
}

const TensorView* Batch::Find(const std::string& name) const {
  for (const TensorView& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Stream::Stream(Client* client, StreamOptions options)
    : client_(client),
      options_(std::move(options)),
      release_(std::make_shared<ReleaseQueue>()) {
  position_ = options_.start;
}

Stream::~Stream() { Cancel(); }

void Stream::Cancel() {
  if (call_ != nullptr && !call_->finished) call_->End(/*cancel=*/true);
}

absl::Status Stream::Start() {
  return Open(Clock::now() + options_.open_timeout);
}

void Stream::Interrupt() {
  std::lock_guard<std::mutex> lock(interrupt_mu_);
  interrupted_ = true;
  // TryCancel is thread-safe; End(), which joins the reader, stays the
  // owner's. A side channel's read ends when the call does.
  if (call_ != nullptr) call_->context.TryCancel();
}

absl::Status Stream::Open(Clock::time_point deadline) {
  absl::StatusOr<std::vector<ClientTransportDef>> transports =
      ParseTransports(options_.transport);
  if (!transports.ok()) return transports.status();
  std::string refusals;
  for (size_t i = 0; i < transports->size(); ++i) {
    const ClientTransportDef& def = (*transports)[i];
    absl::Status s = def.make != nullptr
                         ? OpenWith(def.number, def.make(), deadline)
                         : absl::FailedPreconditionError(absl::StrCat(
                               "this client has no ", def.name, " transport"));
    const bool fall_back =
        absl::IsFailedPrecondition(s) || absl::IsPermissionDenied(s);
    if (!fall_back || i + 1 == transports->size()) {
      if (s.ok()) {
        info_.fallbacks = refusals;
        // A reconnect keeps the transport that worked.
        options_.transport = def.name;
      }
      return s;
    }
    absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", def.name, ": ",
                    s.message());
  }
  return absl::InternalError("no transport to try");
}

absl::Status Stream::OpenWith(int transport_number,
                              std::unique_ptr<ClientTransport> transport,
                              Clock::time_point deadline) {
  Cancel();
  const auto wait = deadline - Clock::now();
  if (!client_->impl_->channel->WaitForConnected(
          std::chrono::system_clock::now() + wait)) {
    // A fail-fast call tells why: no listener, or a TLS handshake refused.
    grpc::ClientContext probe;
    probe.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(1));
    v1::ListDatasetsResponse ignored;
    const grpc::Status why = client_->impl_->stub->ListDatasets(
        &probe, v1::ListDatasetsRequest(), &ignored);
    return absl::UnavailableError(
        absl::StrCat("cannot reach stokerd at ", client_->impl_->target,
                     why.ok() ? "" : ": ", why.error_message()));
  }
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    if (interrupted_) return absl::CancelledError("stream interrupted");
    call_ = std::make_unique<Call>();
  }
  call_->pool = client_->impl_->messages;
  call_->Open(client_->impl_->channel.get());
  call_->transport = std::move(transport);

  v1::StreamRequest request;
  v1::OpenStream* open = request.mutable_open();
  open->set_dataset(options_.dataset);
  open->set_pipeline(options_.pipeline);
  open->set_batch_size(options_.batch_size);
  open->set_seed(options_.seed);
  open->set_epochs(options_.epochs);
  open->set_rank(options_.rank);
  open->set_world_size(options_.world_size);
  open->set_job_id(options_.job_id);
  open->set_drop_last(options_.drop_last);
  open->set_ra_reps(options_.ra_reps);
  open->set_prefetch(options_.prefetch);
  open->set_transport(static_cast<v1::Transport>(transport_number));
  open->set_hold(options_.hold);
  open->set_weight(options_.weight);
  open->set_share(options_.share);
  open->set_raw(options_.raw);
  open->set_gpu_uuid(options_.gpu_uuid);
  switch (options_.compression) {
    case Compression::kNone:
      break;
    case Compression::kZstd:
      open->set_compression(v1::COMPRESSION_ZSTD);
      break;
    case Compression::kAuto:
      open->set_compression(v1::COMPRESSION_AUTO);
      break;
  }
  call_->transport->Prepare(open);
  open->set_open_timeout(
      std::chrono::duration<double>(options_.open_timeout).count());
  open->mutable_start()->set_epoch(position_.epoch);
  open->mutable_start()->set_step(position_.step);
  if (options_.end.epoch != 0 || options_.end.step != 0) {
    open->mutable_end()->set_epoch(options_.end.epoch);
    open->mutable_end()->set_step(options_.end.step);
  }

  v1::StreamResponse response;
  bool opened;
  {
    // The daemon makes an open on a dataset it is still staging wait;
    // meanwhile the watch reports how far the copy is.
    StagingWatch watch(client_, options_.dataset, options_.on_staging);
    opened = call_->rw->Write(request) && call_->Read(&response);
  }
  if (!opened) {
    absl::Status s = NotCancelledByUs(FromGrpc(call_->End(/*cancel=*/false)));
    return s.ok() ? absl::UnavailableError("stream closed while opening") : s;
  }
  if (!response.has_header()) {
    return absl::InternalError("daemon sent no stream header");
  }
  const v1::StreamHeader& h = response.header();
  info_.num_samples = h.num_samples();
  info_.steps_per_epoch = h.steps_per_epoch();
  info_.samples_per_epoch = h.samples_per_epoch();
  info_.prefetch = h.prefetch();
  info_.shared = h.shared();
  info_.share_refused = h.share_refused();
  ack_list_ = h.ack_list();
  info_.transport = TransportName(h.transport());
  {
    // Batches of an earlier connection must not ack into this one.
    std::lock_guard<std::mutex> lock(release_->mu);
    ++release_->generation;
    release_->acks.clear();
    release_->held = 0;
  }
  if (absl::Status s = call_->transport->Attach(h); !s.ok()) {
    Cancel();
    return s;
  }
  call_->channel = call_->transport->side_channel();
  info_.notice_socket = call_->channel != nullptr;
  if (call_->transport->read_ahead()) call_->StartReader();
  last_return_ = Clock::now();
  return absl::OkStatus();
}

absl::Status Stream::Reconnect(const absl::Status& cause) {
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    if (interrupted_) return absl::CancelledError("stream interrupted");
  }
  // The window runs from the first failure that no batch followed.
  const Clock::time_point give_up =
      failing_since_.value_or(Clock::now()) + options_.reconnect_timeout;
  std::chrono::milliseconds backoff(50);
  absl::Status last = cause;
  while (Clock::now() < give_up) {
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    last = Open(std::min(give_up, Clock::now() + options_.open_timeout));
    if (last.ok()) {
      ++reconnects_;
      return last;
    }
    if (last.code() != absl::StatusCode::kUnavailable &&
        last.code() != absl::StatusCode::kDeadlineExceeded) {
      return last;
    }
  }
  return absl::UnavailableError(absl::StrCat(
      "stokerd at ", client_->impl_->target, " did not come back within ",
      options_.reconnect_timeout.count(), " ms to resume at epoch ",
      position_.epoch, " step ", position_.step, ": ", last.message()));
}

absl::Status Stream::Failed(const absl::Status& cause) {
  const Clock::time_point now = Clock::now();
  if (!failing_since_.has_value()) failing_since_ = now;
  ++failures_;
  if (now - *failing_since_ < options_.reconnect_timeout) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrFormat(
      "dataset '%s' pipeline '%s' at epoch %d step %d: the stream failed %d "
      "time%s without a batch in %.1f s (reconnect_timeout %.3g s); the last "
      "error: %s",
      options_.dataset, options_.pipeline, position_.epoch, position_.step,
      failures_, failures_ == 1 ? "" : "s",
      std::chrono::duration<double>(now - *failing_since_).count(),
      std::chrono::duration<double>(options_.reconnect_timeout).count(),
      cause.message()));
}

void Stream::FlushReleased() {
  std::vector<v1::Ack> acks;
  {
    std::lock_guard<std::mutex> lock(release_->mu);
    // Where the daemon takes AckLists, a lone ack waits for the next one
    // (a message less per batch) unless the daemon would then have fewer
    // than `prefetch` slots to fill: the ring has prefetch + hold slots.
    const size_t pending = release_->acks.size();
    if (ack_list_ && pending < 2 &&
        release_->held + pending <= std::max<uint32_t>(1, options_.hold)) {
      return;
    }
    acks.swap(release_->acks);
  }
  if (acks.empty()) return;
  v1::StreamRequest request;
  if (ack_list_) {
    for (v1::Ack& ack : acks)
      *request.mutable_acks()->add_acks() = std::move(ack);
    call_->Send(request);
    return;
  }
  for (v1::Ack& ack : acks) {
    *request.mutable_ack() = std::move(ack);
    call_->Send(request);
  }
}

absl::Status Stream::Next(Batch* batch) {
  // The caller is done with the batch it passes in: for shm, this frees its
  // slot, which the ack below hands back to the daemon.
  *batch = Batch();
  const Clock::time_point asked = Clock::now();
  for (;;) {
    if (call_ == nullptr || call_->finished) {
      return absl::FailedPreconditionError("stream is closed");
    }
    FlushReleased();
    absl::StatusOr<MessagePool::Ptr> popped = call_->Pop();
    if (!popped.ok()) {
      call_->End(/*cancel=*/true);
      return popped.status();
    }
    if (MessagePool::Ptr message = *std::move(popped)) {
      if (!message->response.has_batch()) {
        return absl::InternalError("daemon sent a second header");
      }
      const v1::Batch& b = message->response.batch();
      const Clock::time_point now = Clock::now();
      v1::Ack ack;
      ack.mutable_position()->set_epoch(b.epoch());
      ack.mutable_position()->set_step(b.step());
      ack.set_wait_seconds(std::chrono::duration<double>(now - asked).count());
      ack.set_busy_seconds(
          std::chrono::duration<double>(asked - last_return_).count());
      last_return_ = now;
      failing_since_.reset();
      failures_ = 0;

      // The bytes the tensors live in.
      absl::StatusOr<BatchBytes> bytes = call_->transport->Locate(b);
      if (!bytes.ok()) return bytes.status();
      const uint8_t* const base = bytes->base;
      const size_t size = bytes->size;
      message->keep = std::move(bytes->keep);
      if (call_->transport->holds()) {
        // Acknowledged when the caller releases the batch: until then its
        // memory is the caller's.
        message->release = release_;
        {
          std::lock_guard<std::mutex> lock(release_->mu);
          message->generation = release_->generation;
          ++release_->held;
        }
        message->ack = std::move(ack);
      } else {
        // The bytes are ours now: acknowledge at once, which frees a
        // prefetch slot and reports the data stall.
        v1::StreamRequest request;
        *request.mutable_ack() = std::move(ack);
        call_->Send(request);
      }

      position_ = Position{b.epoch(), b.step() + 1};
      if (position_.step == info_.steps_per_epoch) {
        position_ = Position{b.epoch() + 1, 0};
      }
      batch->sample_ids_.assign(b.sample_ids().begin(), b.sample_ids().end());
      batch->skipped_ids_.assign(b.skipped_ids().begin(),
                                 b.skipped_ids().end());
      batch->sample_reps_.assign(b.sample_reps().begin(),
                                 b.sample_reps().end());
      batch->skipped_reps_.assign(b.skipped_reps().begin(),
                                  b.skipped_reps().end());
      batch->shared_ = b.shared();
      batch->wire_bytes_ = b.payload().size();
      batch->payload_bytes_ = size;
      batch->tensors_.clear();
      for (const v1::TensorSpec& t : b.tensors()) {
        if (t.offset() + t.length() > size) {
          return absl::DataLossError(
              absl::StrCat("tensor '", t.name(), "' of epoch ", b.epoch(),
                           " step ", b.step(), " lies outside its batch"));
        }
        batch->tensors_.push_back(
            TensorView{t.name(),
                       FromProto(t.dtype()),
                       {t.shape().begin(), t.shape().end()},
                       base + t.offset(),
                       t.length(),
                       t.offsets_for(),
                       t.utf8(),
                       bytes->device});
      }
      batch->message_ = std::move(message);
      return absl::OkStatus();
    }
    absl::Status s = NotCancelledByUs(FromGrpc(call_->End(/*cancel=*/false)));
    if (s.ok() && call_->channel != nullptr && call_->channel->truncated()) {
      return absl::DataLossError(
          absl::StrCat("the side channel ", call_->channel->path(),
                       " ended inside a frame, yet the stream ended normally"));
    }
    if (s.ok()) return absl::OutOfRangeError("end of stream");
    if (s.code() != absl::StatusCode::kUnavailable) return s;
    if (absl::Status r = Failed(s); !r.ok()) return r;
    if (absl::Status r = Reconnect(s); !r.ok()) return r;
  }
}

}  // namespace stoker
