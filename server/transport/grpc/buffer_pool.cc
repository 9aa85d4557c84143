#include "server/transport/grpc/buffer_pool.h"

namespace stoker::transport {
namespace {

// What a payload slice carries to its destroy callback.
struct SliceOwner {
  std::shared_ptr<BufferPool> pool;
  std::unique_ptr<service::BatchBuffer> buffer;
};

void ReleaseSlice(void* user_data) {
  std::unique_ptr<SliceOwner> owner(static_cast<SliceOwner*>(user_data));
  owner->pool->Return(service::ReclaimBuffer(std::move(owner->buffer)));
}

}  // namespace

BufferPool::BufferPool(size_t buffer_bytes, uint32_t max_buffers,
                       std::shared_ptr<service::StreamTicket> ticket)
    : buffer_bytes_(buffer_bytes),
      max_buffers_(max_buffers),
      ticket_(std::move(ticket)) {}

std::unique_ptr<service::BatchBuffer> BufferPool::Take() {
  absl::MutexLock lock(&mu_);
  if (!free_.empty()) {
    auto buffer = std::move(free_.back());
    free_.pop_back();
    return buffer;
  }
  if (allocated_ >= max_buffers_) return nullptr;
  ++allocated_;
  return std::make_unique<service::HeapBatchBuffer>(buffer_bytes_);
}

void BufferPool::Return(std::unique_ptr<service::BatchBuffer> buffer) {
  {
    absl::MutexLock lock(&mu_);
    free_.push_back(std::move(buffer));
  }
  absl::ReaderMutexLock lock(&hook_mu_);
  if (hook_) hook_();
}

grpc::Slice BufferPool::WrapAsSlice(
    std::unique_ptr<service::BatchBuffer> buffer, size_t bytes) {
  uint8_t* data = buffer->data();
  auto* owner = new SliceOwner{shared_from_this(), std::move(buffer)};
  return grpc::Slice(data, bytes, &ReleaseSlice, owner);
}

void BufferPool::SetReturnHook(std::function<void()> hook) {
  absl::MutexLock lock(&hook_mu_);
  hook_ = std::move(hook);
}

void BufferPool::ClearReturnHook() {
  absl::MutexLock lock(&hook_mu_);
  hook_ = nullptr;
}

}  // namespace stoker::transport
