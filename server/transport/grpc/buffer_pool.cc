#include "server/transport/grpc/buffer_pool.h"

namespace stoker::transport {
namespace {

// A buffer of the pool out on loan: dropping it returns it.
class ReturningBuffer : public service::BatchBuffer {
 public:
  ReturningBuffer(std::shared_ptr<BufferPool> pool,
             std::unique_ptr<service::BatchBuffer> buffer)
      : pool_(std::move(pool)), buffer_(std::move(buffer)) {}
  ~ReturningBuffer() override {
    pool_->Return(service::ReclaimBuffer(std::move(buffer_)));
  }
  uint8_t* data() override { return buffer_->data(); }
  size_t capacity() const override { return buffer_->capacity(); }

 private:
  const std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<service::BatchBuffer> buffer_;
};

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

std::unique_ptr<service::BatchBuffer> BufferPool::Lend(
    std::unique_ptr<service::BatchBuffer> buffer) {
  return std::make_unique<ReturningBuffer>(shared_from_this(), std::move(buffer));
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
