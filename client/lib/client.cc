#include "stoker/client.h"

#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "stoker/v1/stoker.grpc.pb.h"

namespace stoker {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

DType FromProto(v1::DType t) {
  switch (t) {
    case v1::DTYPE_UINT8:
      return DType::kUint8;
    case v1::DTYPE_INT64:
      return DType::kInt64;
    case v1::DTYPE_FLOAT16:
      return DType::kFloat16;
    case v1::DTYPE_FLOAT32:
      return DType::kFloat32;
    default:
      return DType::kUnknown;
  }
}

absl::StatusOr<v1::Transport> ParseTransport(const std::string& name) {
  if (name.empty() || name == "grpc") return v1::TRANSPORT_GRPC;
  if (name == "shm") return v1::TRANSPORT_SHM;
  if (name == "cuda_ipc") return v1::TRANSPORT_CUDA_IPC;
  return absl::InvalidArgumentError(absl::StrCat(
      "transport '", name, "' is unknown; use grpc, shm or cuda_ipc"));
}

std::string TransportName(v1::Transport t) {
  switch (t) {
    case v1::TRANSPORT_SHM:
      return "shm";
    case v1::TRANSPORT_CUDA_IPC:
      return "cuda_ipc";
    default:
      return "grpc";
  }
}

}  // namespace

struct Client::Impl {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Stoker::Stub> stub;
};

struct Batch::Message {
  v1::StreamResponse response;
};

struct Stream::Call {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>>
      rw;
  bool finished = false;
};

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

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

std::unique_ptr<Client> Client::Connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // Reconnect quickly after a daemon restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  impl->stub = v1::Stoker::NewStub(impl->channel);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<std::vector<DatasetSummary>> Client::ListDatasets() {
  grpc::ClientContext context;
  v1::ListDatasetsResponse response;
  grpc::Status s =
      impl_->stub->ListDatasets(&context, v1::ListDatasetsRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  std::vector<DatasetSummary> out;
  for (const v1::DatasetInfo& d : response.datasets()) {
    out.push_back({d.name(), d.num_samples(), d.num_shards(), d.bytes(),
                   {d.classes().begin(), d.classes().end()}});
  }
  return out;
}

absl::StatusOr<std::vector<PipelineSummary>> Client::ListPipelines() {
  grpc::ClientContext context;
  v1::ListPipelinesResponse response;
  grpc::Status s = impl_->stub->ListPipelines(
      &context, v1::ListPipelinesRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  std::vector<PipelineSummary> out;
  for (const v1::PipelineInfo& p : response.pipelines()) {
    out.push_back({p.name(), {p.ops().begin(), p.ops().end()}});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Stream>> Client::OpenStream(
    const StreamOptions& options) {
  std::unique_ptr<Stream> stream(new Stream(this, options));
  const auto deadline = std::chrono::steady_clock::now() + options.open_timeout;
  if (absl::Status s = stream->Open(deadline); !s.ok()) return s;
  return stream;
}

Stream::Stream(Client* client, StreamOptions options)
    : client_(client), options_(std::move(options)) {
  position_ = options_.start;
}

Stream::~Stream() { Cancel(); }

void Stream::Cancel() {
  if (call_ != nullptr && !call_->finished) {
    call_->context.TryCancel();
    call_->rw->Finish();
    call_->finished = true;
  }
}

absl::Status Stream::Open(Clock::time_point deadline) {
  absl::StatusOr<v1::Transport> transport = ParseTransport(options_.transport);
  if (!transport.ok()) return transport.status();
  Cancel();
  const auto wait = deadline - Clock::now();
  if (!client_->impl_->channel->WaitForConnected(
          std::chrono::system_clock::now() + wait)) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach stokerd at ", client_->impl_->target));
  }
  call_ = std::make_unique<Call>();
  call_->rw = client_->impl_->stub->Stream(&call_->context);

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
  open->set_prefetch(options_.prefetch);
  open->set_transport(*transport);
  open->mutable_start()->set_epoch(position_.epoch);
  open->mutable_start()->set_step(position_.step);

  v1::StreamResponse response;
  if (!call_->rw->Write(request) || !call_->rw->Read(&response)) {
    call_->finished = true;
    absl::Status s = FromGrpc(call_->rw->Finish());
    return s.ok() ? absl::UnavailableError("stream closed while opening") : s;
  }
  if (!response.has_header()) {
    return absl::InternalError("daemon sent no stream header");
  }
  const v1::StreamHeader& h = response.header();
  info_ = StreamInfo{h.num_samples(), h.steps_per_epoch(),
                     h.samples_per_epoch(), h.prefetch(),
                     TransportName(h.transport())};
  last_return_ = Clock::now();
  return absl::OkStatus();
}

absl::Status Stream::Reconnect(const absl::Status& cause) {
  const Clock::time_point give_up = Clock::now() + options_.reconnect_timeout;
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

absl::Status Stream::Next(Batch* batch) {
  const Clock::time_point asked = Clock::now();
  for (;;) {
    if (call_ == nullptr || call_->finished) {
      return absl::FailedPreconditionError("stream is closed");
    }
    auto message = std::make_unique<Batch::Message>();
    if (call_->rw->Read(&message->response)) {
      if (!message->response.has_batch()) {
        return absl::InternalError("daemon sent a second header");
      }
      const v1::Batch& b = message->response.batch();
      // Acknowledge: frees a prefetch slot, and reports the data stall.
      const Clock::time_point now = Clock::now();
      v1::StreamRequest ack;
      ack.mutable_ack()->mutable_position()->set_epoch(b.epoch());
      ack.mutable_ack()->mutable_position()->set_step(b.step());
      ack.mutable_ack()->set_wait_seconds(
          std::chrono::duration<double>(now - asked).count());
      ack.mutable_ack()->set_busy_seconds(
          std::chrono::duration<double>(asked - last_return_).count());
      call_->rw->Write(ack);
      last_return_ = now;

      position_ = Position{b.epoch(), b.step() + 1};
      if (position_.step == info_.steps_per_epoch) {
        position_ = Position{b.epoch() + 1, 0};
      }
      batch->sample_ids_.assign(b.sample_ids().begin(), b.sample_ids().end());
      batch->skipped_ids_.assign(b.skipped_ids().begin(),
                                 b.skipped_ids().end());
      batch->tensors_.clear();
      const std::string& payload = b.payload();
      for (const v1::TensorSpec& t : b.tensors()) {
        if (t.offset() + t.length() > payload.size()) {
          return absl::DataLossError(absl::StrCat(
              "tensor '", t.name(), "' of epoch ", b.epoch(), " step ",
              b.step(), " lies outside the payload"));
        }
        batch->tensors_.push_back(TensorView{
            t.name(), FromProto(t.dtype()),
            {t.shape().begin(), t.shape().end()},
            reinterpret_cast<const uint8_t*>(payload.data()) + t.offset(),
            t.length()});
      }
      batch->message_ = std::move(message);
      return absl::OkStatus();
    }
    call_->finished = true;
    absl::Status s = FromGrpc(call_->rw->Finish());
    if (s.ok()) return absl::OutOfRangeError("end of stream");
    if (s.code() != absl::StatusCode::kUnavailable) return s;
    if (absl::Status r = Reconnect(s); !r.ok()) return r;
  }
}

}  // namespace stoker
