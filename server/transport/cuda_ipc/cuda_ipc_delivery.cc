#include "server/transport/cuda_ipc/cuda_ipc_delivery.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"
#include "server/transport/cuda_ipc/device_ring_memory.h"
#include "server/transport/cuda_ipc/pinned_pool.h"
#include "server/transport/cuda_ipc/ring_sharing.h"
#include "server/transport/shm/notice_channel.h"
#include "server/transport/wire.h"

namespace stoker::transport {
namespace {

// The events of one batch's device work: before the copy, after it, and
// after the format stage (the one the delivery's thread waits on, made with
// cudaEventBlockingSync so that waiting sleeps instead of spinning a core).
struct BatchEvents {
  cudaEvent_t start = nullptr, copied = nullptr, done = nullptr;
};

class CudaIpcDelivery : public Delivery,
                        public SharedDescriptor,
                        public std::enable_shared_from_this<CudaIpcDelivery> {
 public:
  static absl::StatusOr<std::shared_ptr<CudaIpcDelivery>> Create(
      CudaIpcOpen open);
  ~CudaIpcDelivery() override;

  std::unique_ptr<service::BatchBuffer> Take() override {
    return host_->Take();
  }
  Handover HandOver(service::ReadyBatch batch) override;
  void Acked(uint64_t epoch, uint64_t step) override;
  bool MayEnd(uint32_t) const override;
  void DescribeIn(v1::StreamHeader* header) override;
  void SetReturnHook(std::function<void()> hook) override {
    absl::MutexLock lock(&hook_mu_);
    hook_ = std::move(hook);
  }
  void ClearReturnHook() override {
    absl::MutexLock lock(&hook_mu_);
    hook_ = nullptr;
  }
  SideChannel* side_channel() override { return &notices_; }

  int fd() const override { return ring_->fd(); }
  void MarkHandedOver() override {
    {
      absl::MutexLock lock(&mu_);
      handed_over_ = true;
    }
    RunHook();
  }

 private:
  // The side channel the reactor sees: it takes each batch's notice right
  // after HandOver and leaves it to the thread, which sends it on the
  // stream's notice socket once the batch's device work has completed.
  class Notices : public SideChannel {
   public:
    explicit Notices(CudaIpcDelivery* delivery) : delivery_(delivery) {}
    bool connected() const override {
      return delivery_->channel_->connected();
    }
    void Send(const v1::StreamResponse& message) override;
    void End() override;
    void Detach() override;

   private:
    CudaIpcDelivery* const delivery_;
  };

  // A batch whose device work is queued, or the end of the stream.
  struct InFlight {
    std::unique_ptr<service::BatchBuffer> host;  // Until copied.
    uint32_t events = 0;  // Its place in events_.
    uint64_t h2d_bytes = 0;
    std::optional<v1::StreamResponse> message;  // Set by Notices::Send.
    absl::Status error;  // Queueing its work failed: the stream fails.
    bool end = false;     // Notices::End: end the notice socket here.
  };

  explicit CudaIpcDelivery(CudaIpcOpen open)
      : open_(std::move(open)), notices_(this) {}
  absl::Status Init();
  // Queues the batch's copy and format stage into device slot `slot`, and
  // rewrites `described`'s tensors to where they are on the device.
  absl::Status Queue(const service::ReadyBatch& batch, uint32_t slot,
                     const BatchEvents& events, v1::Batch* described);
  void Run();  // The thread.
  void RunHook() {
    absl::MutexLock lock(&hook_mu_);
    if (hook_) hook_();
  }
  // Stops the thread (joined unless called on it).
  void Stop();

  const CudaIpcOpen open_;
  Notices notices_;
  std::shared_ptr<NoticeChannel> channel_;
  std::string token_;  // For the ring's descriptor (VMM only).
  std::unique_ptr<DeviceRingMemory> ring_;
  std::vector<std::string> fell_back_;  // Sharing kinds that did not serve.
  std::unique_ptr<DeviceBudget::Reservation> reservation_;
  std::shared_ptr<PinnedPool> host_;
  cudaStream_t stream_ = nullptr;
  uint8_t* staging_ = nullptr;         // A rendered batch, on the device.
  uint32_t* tables_ = nullptr;         // One table per output, on the device.
  std::vector<BatchEvents> events_;    // One per window place.
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::vector<uint32_t> free_slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_events_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> sent_ ABSL_GUARDED_BY(mu_);
  std::deque<InFlight> queue_ ABSL_GUARDED_BY(mu_);
  bool handed_over_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex hook_mu_;  // Held while the hook runs.
  std::function<void()> hook_ ABSL_GUARDED_BY(hook_mu_);
};

absl::StatusOr<std::shared_ptr<CudaIpcDelivery>> CudaIpcDelivery::Create(
    CudaIpcOpen open) {
  std::shared_ptr<CudaIpcDelivery> d(new CudaIpcDelivery(std::move(open)));
  if (absl::Status s = d->Init(); !s.ok()) return s;
  if (d->ring_->kind() == HandleKind::kVmmPosixFd) {
    d->token_ = d->open_.fd_server->Register(d);
  } else {
    d->handed_over_ = true;  // The handle travels in the header.
  }
  d->thread_ = std::thread([raw = d.get()] { raw->Run(); });
  return d;
}

absl::Status CudaIpcDelivery::Init() {
  const CudaIpcOpen& o = open_;
  const uint64_t ring_bytes = uint64_t{o.slots} * o.slot_bytes;
  const uint64_t tables_bytes =
      o.outputs.size() * NormalizeTable::kEntries * sizeof(uint32_t);
  absl::StatusOr<GpuSharingSupport> support = QuerySharingSupport(o.device);
  if (!support.ok()) return support.status();
  // A VMM ring is its size rounded up to the GPU's granularity, queried;
  // cudaMalloc's own rounding of a legacy ring is not counted.
  const uint64_t granularity =
      std::max<uint64_t>(1, support->vmm_granularity);
  const uint64_t reserved =
      (ring_bytes + granularity - 1) / granularity * granularity +
      o.host_bytes + tables_bytes;
  absl::StatusOr<std::unique_ptr<DeviceBudget::Reservation>> reservation =
      o.budget->Reserve(
          o.gpu_uuid, reserved,
          absl::StrCat("a ring of ", o.slots, " slots of ", Mib(o.slot_bytes),
                       " and ", Mib(o.host_bytes), " of staging"));
  if (!reservation.ok()) return reservation.status();
  reservation_ = *std::move(reservation);

  absl::StatusOr<SharingChoice> choice =
      ChooseSharing(*support, o.gpu_uuid, [&](HandleKind kind) {
        absl::StatusOr<std::unique_ptr<DeviceRingMemory>> memory =
            DeviceRingMemory::Create(o.device, ring_bytes, kind);
        if (!memory.ok()) return memory.status();
        ring_ = *std::move(memory);
        return absl::OkStatus();
      });
  if (!choice.ok()) return choice.status();
  fell_back_ = choice->fell_back;

  STOKER_CUDA_RETURN_IF_ERROR(cudaSetDevice(o.device));
  STOKER_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  void* staging = nullptr;
  STOKER_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging, o.host_bytes));
  staging_ = static_cast<uint8_t*>(staging);
  void* tables = nullptr;
  STOKER_CUDA_RETURN_IF_ERROR(cudaMalloc(&tables, tables_bytes));
  tables_ = static_cast<uint32_t*>(tables);
  for (size_t t = 0; t < o.outputs.size(); ++t) {
    if (!o.outputs[t].table.has_value()) continue;
    STOKER_CUDA_RETURN_IF_ERROR(cudaMemcpy(
        tables_ + t * NormalizeTable::kEntries,
        o.outputs[t].table->entries().data(),
        NormalizeTable::kEntries * sizeof(uint32_t), cudaMemcpyHostToDevice));
  }
  absl::StatusOr<std::shared_ptr<PinnedPool>> host =
      PinnedPool::Create(o.slots, o.host_bytes);
  if (!host.ok()) return host.status();
  host_ = *std::move(host);
  events_.resize(o.slots);
  for (BatchEvents& e : events_) {
    STOKER_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e.start));
    STOKER_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e.copied));
    STOKER_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&e.done, cudaEventBlockingSync));
  }
  channel_ = NoticeChannel::Create(o.fd_server, o.hooks);
  absl::MutexLock lock(&mu_);
  for (uint32_t i = o.slots; i > 0; --i) {
    free_slots_.push_back(i - 1);
    free_events_.push_back(i - 1);
  }
  return absl::OkStatus();
}

CudaIpcDelivery::~CudaIpcDelivery() {
  Stop();
  if (!token_.empty()) open_.fd_server->Unregister(token_);
  if (channel_ != nullptr) channel_->Detach();
  cudaSetDevice(open_.device);
  // Nothing may still write the memory freed below.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  {
    absl::MutexLock lock(&mu_);
    queue_.clear();  // Gives the host buffers back.
  }
  for (BatchEvents& e : events_) {
    if (e.start != nullptr) cudaEventDestroy(e.start);
    if (e.copied != nullptr) cudaEventDestroy(e.copied);
    if (e.done != nullptr) cudaEventDestroy(e.done);
  }
  if (tables_ != nullptr) cudaFree(tables_);
  if (staging_ != nullptr) cudaFree(staging_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  // ring_ and host_ go with the members; reservation_ last of all.
  ring_.reset();
}

void CudaIpcDelivery::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // A hook of ours ended the stream.
  } else {
    thread_.join();
  }
}

Handover CudaIpcDelivery::HandOver(service::ReadyBatch batch) {
  if (batch.buffer->lender() != nullptr) {
    // A shared run's batch lives in the run's memory (not pinned): copied
    // into this stream's own pinned buffer, which it holds.
    std::unique_ptr<service::BatchBuffer> own = batch.buffer->TakeOwn();
    std::memcpy(own->data(), batch.buffer->data(), batch.bytes);
    batch.buffer = std::move(own);
  }
  Handover handover;
  v1::Batch* described = handover.message.mutable_batch();
  FillBatchMetadata(batch, described);
  InFlight item;
  item.h2d_bytes = batch.bytes;
  uint32_t slot = 0;
  bool have_slot = false;
  {
    absl::MutexLock lock(&mu_);
    // The window bounds the batches sent and not acknowledged, and each
    // holds one slot and (until its notice) one set of events: a free one
    // is always there.
    if (!free_slots_.empty() && !free_events_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
      item.events = free_events_.back();
      free_events_.pop_back();
      sent_[{batch.epoch, batch.step}] = slot;
      have_slot = true;
    }
  }
  if (!have_slot) {
    item.error = absl::InternalError(
        "cuda_ipc: a batch was handed over with every device slot in use");
  } else {
    described->set_slot(slot);
    item.error = Queue(batch, slot, events_[item.events], described);
  }
  item.host = std::move(batch.buffer);
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(item));
  return handover;
}

absl::Status CudaIpcDelivery::Queue(const service::ReadyBatch& batch,
                                    uint32_t slot, const BatchEvents& events,
                                    v1::Batch* described) {
  STOKER_CUDA_RETURN_IF_ERROR(cudaSetDevice(open_.device));
  uint8_t* const dst = ring_->data() + size_t{slot} * open_.slot_bytes;
  STOKER_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.start, stream_));
  STOKER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging_, batch.buffer->data(),
                                              batch.bytes,
                                              cudaMemcpyHostToDevice, stream_));
  STOKER_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.copied, stream_));
  if (batch.tensors.size() != open_.outputs.size()) {
    return absl::InternalError(
        absl::StrCat("cuda_ipc: a batch of ", batch.tensors.size(),
                     " tensors for ", open_.outputs.size(), " outputs"));
  }
  size_t offset = 0;
  for (size_t t = 0; t < batch.tensors.size(); ++t) {
    const service::BatchTensor& in = batch.tensors[t];
    const DeviceOutput& out = open_.outputs[t];
    v1::TensorSpec* spec = described->mutable_tensors(static_cast<int>(t));
    size_t bytes = in.length;
    if (out.normalize.has_value()) {
      const uint32_t samples =
          in.spec.shape.empty() ? 0 : static_cast<uint32_t>(in.spec.shape[0]);
      bytes = samples * out.normalize->output_bytes();
      if (absl::Status s = NormalizeOnDevice(
              *out.normalize, tables_ + t * NormalizeTable::kEntries,
              staging_ + in.offset, samples, dst + offset, stream_);
          !s.ok()) {
        return s;
      }
      spec->set_dtype(ToProto(out.spec.dtype));
      spec->clear_shape();
      spec->add_shape(samples);
      for (int64_t d : out.spec.shape) spec->add_shape(d);
    } else if (bytes > 0) {
      STOKER_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst + offset, staging_ + in.offset, bytes,
                          cudaMemcpyDeviceToDevice, stream_));
    }
    if (offset + bytes > open_.slot_bytes) {
      return absl::InternalError(absl::StrCat(
          "cuda_ipc: a batch needs more than its slot's ", open_.slot_bytes,
          " bytes"));
    }
    spec->set_offset(offset);
    spec->set_length(bytes);
    offset = service::BatchLayout::AlignUp(offset + bytes);
  }
  STOKER_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.done, stream_));
  return absl::OkStatus();
}

void CudaIpcDelivery::Notices::Send(const v1::StreamResponse& message) {
  CudaIpcDelivery& d = *delivery_;
  absl::MutexLock lock(&d.mu_);
  // The reactor sends a batch's notice right after its HandOver, which
  // queued the batch last.
  if (!d.queue_.empty() && !d.queue_.back().end) {
    d.queue_.back().message = message;
  }
}

void CudaIpcDelivery::Notices::End() {
  CudaIpcDelivery& d = *delivery_;
  {
    absl::MutexLock lock(&d.mu_);
    // A stream that ends with batches still on the device (it failed) ends
    // its socket after their notices; one that ran to its end has none.
    if (!d.queue_.empty()) {
      InFlight end;
      end.end = true;
      d.queue_.push_back(std::move(end));
      return;
    }
  }
  d.channel_->End();
}

void CudaIpcDelivery::Notices::Detach() {
  delivery_->Stop();
  delivery_->channel_->Detach();
}

void CudaIpcDelivery::Run() {
  cudaSetDevice(open_.device);
  for (;;) {
    InFlight* front = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CudaIpcDelivery* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
            return d->stopping_ ||
                   (!d->queue_.empty() &&
                    (d->queue_.front().end ||
                     d->queue_.front().message.has_value()));
          },
          this));
      if (stopping_) return;
      // Only this thread pops, and the deque keeps the front in place.
      front = &queue_.front();
    }
    if (front->end) {
      channel_->End();
    } else {
      absl::Status status = front->error;
      if (status.ok()) {
        const BatchEvents& e = events_[front->events];
        if (cudaError_t r = cudaEventSynchronize(e.done); r != cudaSuccess) {
          status = CudaError("cudaEventSynchronize (a batch's device work)", r);
        } else {
          float copy_ms = 0, kernel_ms = 0;
          cudaEventElapsedTime(&copy_ms, e.start, e.copied);
          cudaEventElapsedTime(&kernel_ms, e.copied, e.done);
          CudaIpcCounts& c = *open_.counts;
          c.batches.fetch_add(1, std::memory_order_relaxed);
          c.h2d_bytes.fetch_add(front->h2d_bytes, std::memory_order_relaxed);
          c.h2d_nanos.fetch_add(static_cast<uint64_t>(copy_ms * 1e6),
                                std::memory_order_relaxed);
          c.kernel_nanos.fetch_add(static_cast<uint64_t>(kernel_ms * 1e6),
                                   std::memory_order_relaxed);
        }
      }
      if (!status.ok()) {
        if (open_.hooks.lost) open_.hooks.lost(status);
        return;
      }
      channel_->Send(*front->message);
    }
    {
      absl::MutexLock lock(&mu_);
      if (!front->end) free_events_.push_back(front->events);
      queue_.pop_front();  // The host buffer goes back to its pool.
    }
    RunHook();
  }
}

void CudaIpcDelivery::Acked(uint64_t epoch, uint64_t step) {
  absl::MutexLock lock(&mu_);
  auto it = sent_.find({epoch, step});
  if (it == sent_.end()) return;
  free_slots_.push_back(it->second);
  sent_.erase(it);
}

bool CudaIpcDelivery::MayEnd(uint32_t) const {
  absl::MutexLock lock(&mu_);
  return handed_over_ && queue_.empty();
}

void CudaIpcDelivery::DescribeIn(v1::StreamHeader* header) {
  header->set_transport(v1::TRANSPORT_CUDA_IPC);
  header->clear_outputs();
  for (const DeviceOutput& out : open_.outputs) {
    ToProto(out.spec, header->add_outputs());
  }
  v1::CudaIpcRing* ring = header->mutable_cuda_ipc();
  ring->set_gpu_uuid(open_.gpu_uuid);
  ring->set_handle_kind(ToProto(ring_->kind()));
  if (ring_->kind() == HandleKind::kVmmPosixFd) {
    ring->set_fd_socket(open_.fd_server->path());
    ring->set_token(token_);
  } else {
    ring->set_legacy_handle(ring_->legacy_handle());
  }
  ring->set_slots(open_.slots);
  ring->set_slot_bytes(open_.slot_bytes);
  ring->set_ring_bytes(ring_->bytes());
  for (const std::string& reason : fell_back_) ring->add_fell_back(reason);
  header->mutable_notices()->set_path(channel_->path());
  header->mutable_notices()->set_token(channel_->token());
}

}  // namespace

absl::StatusOr<std::shared_ptr<Delivery>> OpenCudaIpcDelivery(
    CudaIpcOpen open) {
  absl::StatusOr<std::shared_ptr<CudaIpcDelivery>> d =
      CudaIpcDelivery::Create(std::move(open));
  if (!d.ok()) return d.status();
  return std::shared_ptr<Delivery>(*std::move(d));
}

}  // namespace stoker::transport
