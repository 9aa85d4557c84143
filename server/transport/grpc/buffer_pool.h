// BufferPool: the heap batch buffers of one grpc-transport stream.
//
// At most `max_buffers` buffers exist at once. A buffer is out while a batch
// is built in it and while gRPC sends it; gRPC may hold the payload a little
// longer than the RPC, so the pool is shared with the buffers it lends and
// keeps the stream's memory ticket until the last buffer is back.
//
// Thread-safe. The return hook runs on the thread that returns a buffer,
// outside the pool's lock; after ClearReturnHook() returns it never runs.
#ifndef STOKER_SERVER_TRANSPORT_GRPC_BUFFER_POOL_H_
#define STOKER_SERVER_TRANSPORT_GRPC_BUFFER_POOL_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/service/batch.h"
#include "server/service/stream_service.h"

namespace stoker::transport {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(size_t buffer_bytes, uint32_t max_buffers,
             std::shared_ptr<service::StreamTicket> ticket);

  // A free buffer, or a new one while fewer than max exist; else null.
  std::unique_ptr<service::BatchBuffer> Take();
  void Return(std::unique_ptr<service::BatchBuffer> buffer);

  // `buffer`, as a buffer that returns to this pool when dropped (for a
  // batch a shared run lent, the stream's own buffer it held, letting the
  // run's go).
  std::unique_ptr<service::BatchBuffer> Lend(
      std::unique_ptr<service::BatchBuffer> buffer);

  void SetReturnHook(std::function<void()> hook);
  void ClearReturnHook();

 private:
  const size_t buffer_bytes_;
  const uint32_t max_buffers_;
  const std::shared_ptr<service::StreamTicket> ticket_;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<service::BatchBuffer>> free_ ABSL_GUARDED_BY(mu_);
  uint32_t allocated_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex hook_mu_;  // Held shared while the hook runs.
  std::function<void()> hook_ ABSL_GUARDED_BY(hook_mu_);
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_GRPC_BUFFER_POOL_H_
