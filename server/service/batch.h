// Batch layout and the buffers batches are assembled in.
//
// A batch is one contiguous buffer holding each output tensor back to back,
// each at a 64-byte aligned offset, sample after sample: tensor t of sample i
// lives at offset(t) + i * sample_bytes(t). Workers write every sample
// straight to its place, so the buffer a transport hands over (a gRPC slice,
// a shared-memory slot) is the one the pipeline wrote: no collate copy.
//
// A batch with fewer samples than the batch size (the end of an epoch, or
// samples skipped as corrupt) is compacted in place so that its tensors are
// contiguous again, with offsets recomputed for the samples it holds.
#ifndef STOKER_SERVER_SERVICE_BATCH_H_
#define STOKER_SERVER_SERVICE_BATCH_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/tensor_spec.h"

namespace stoker::service {

// Where each tensor of a batch of `batch_size` samples lives. Immutable.
class BatchLayout {
 public:
  static constexpr size_t kAlignment = 64;

  BatchLayout(std::vector<tensor::TensorSpec> per_sample, uint32_t batch_size);

  const std::vector<tensor::TensorSpec>& per_sample() const { return specs_; }
  uint32_t batch_size() const { return batch_size_; }
  // Byte offset of tensor t for a batch of n samples.
  size_t Offset(size_t t, uint32_t n) const;
  size_t SampleBytes(size_t t) const { return specs_[t].bytes(); }
  // Bytes a batch of n samples occupies; Bytes(batch_size()) is the buffer size.
  size_t Bytes(uint32_t n) const;
  // Pointer to tensor t of sample i in a full-size buffer.
  uint8_t* SamplePtr(uint8_t* base, size_t t, uint32_t i) const {
    return base + Offset(t, batch_size_) + i * SampleBytes(t);
  }

 private:
  const std::vector<tensor::TensorSpec> specs_;
  const uint32_t batch_size_;
};

// A buffer owned by a transport that a batch is assembled into. The stream
// borrows it while the batch is built and hands it back in a ReadyBatch.
class BatchBuffer {
 public:
  // Where a buffer lives: the ring or pool it belongs to (compared, never
  // followed) and its index there; {nullptr, 0} for a buffer on its own.
  struct Home {
    const void* owner = nullptr;
    uint32_t index = 0;
  };

  virtual ~BatchBuffer() = default;
  virtual uint8_t* data() = 0;
  virtual size_t capacity() const = 0;
  virtual Home home() const { return {}; }
  // A batch lent by a shared run (LentBatchBuffer) reads the run's buffer,
  // and holds the stream's own: the one, or null for any other buffer...
  virtual const BatchBuffer* lender() const { return nullptr; }
  // ...and the other, taken out (null for any other buffer).
  virtual std::unique_ptr<BatchBuffer> TakeOwn() { return nullptr; }
};

// A plain heap buffer, aligned for SIMD stores.
class HeapBatchBuffer : public BatchBuffer {
 public:
  explicit HeapBatchBuffer(size_t bytes);
  uint8_t* data() override { return data_.get(); }
  size_t capacity() const override { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t bytes_;
};

// Buffers of one size that a shared run builds its batches in. The
// composition root chooses memory that every transport can hand over in
// place (a memfd ring, which shm clients map), so that a batch built once
// reaches each consumer without a copy.
class BufferSource {
 public:
  virtual ~BufferSource() = default;
  // A buffer not in use, or null when every one is. A run keeps the buffers
  // it takes and reuses them; it never gives one back.
  virtual std::unique_ptr<BatchBuffer> Take() = 0;
};

// Makes a source of `count` buffers of `bytes` each; the source keeps
// `hold` (the memory reservation) for as long as it lives.
using BufferSourceFactory =
    std::function<absl::StatusOr<std::shared_ptr<BufferSource>>(
        uint32_t count, size_t bytes, std::shared_ptr<void> hold)>;

// Heap buffers, at most `count`, each allocated when first taken.
class HeapBufferSource : public BufferSource {
 public:
  HeapBufferSource(uint32_t count, size_t bytes, std::shared_ptr<void> hold)
      : count_(count), bytes_(bytes), hold_(std::move(hold)) {}
  std::unique_ptr<BatchBuffer> Take() override;

 private:
  const uint32_t count_;
  const size_t bytes_;
  const std::shared_ptr<void> hold_;
  std::atomic<uint32_t> taken_{0};
};

// One tensor of a finished batch: its spec with the batch dimension first.
struct BatchTensor {
  tensor::TensorSpec spec;
  size_t offset = 0;
  size_t length = 0;
};

// A finished batch, ready for its transport.
struct ReadyBatch {
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> sample_ids;
  std::vector<uint64_t> skipped_ids;
  std::vector<BatchTensor> tensors;
  size_t bytes = 0;  // Payload bytes, from the start of the buffer.
  std::unique_ptr<BatchBuffer> buffer;
  bool shared = false;  // Built once by a shared run for several streams.
};

// A batch that a shared run lends to a stream: it reads the run's buffer in
// place, and holds the stream's own buffer, unused, so that the batch keeps
// its place in the stream's window until the transport is done with it.
class LentBatchBuffer : public BatchBuffer {
 public:
  LentBatchBuffer(std::shared_ptr<const ReadyBatch> batch,
                  std::unique_ptr<BatchBuffer> own)
      : batch_(std::move(batch)), own_(std::move(own)) {}
  uint8_t* data() override { return batch_->buffer->data(); }
  size_t capacity() const override { return batch_->buffer->capacity(); }
  // The run's buffer the batch is in.
  const BatchBuffer* lender() const override { return batch_->buffer.get(); }
  // The stream's own buffer; the run's batch is let go with this object.
  std::unique_ptr<BatchBuffer> TakeOwn() override { return std::move(own_); }

 private:
  const std::shared_ptr<const ReadyBatch> batch_;
  std::unique_ptr<BatchBuffer> own_;
};

// The transport's own buffer behind `buffer`, once the batch in it is done
// with: `buffer` itself, or the stream's buffer that a lent batch held.
std::unique_ptr<BatchBuffer> ReclaimBuffer(std::unique_ptr<BatchBuffer> buffer);

// Moves the kept samples of a full-size batch to the front of each tensor and
// the tensors next to each other, as BatchLayout places a batch of
// kept.size() samples. `kept` lists the sample positions to keep, ascending.
void CompactBatch(const BatchLayout& layout, uint8_t* base,
                  const std::vector<uint32_t>& kept);

// The tensors of a batch of n samples laid out by `layout`.
std::vector<BatchTensor> DescribeBatch(const BatchLayout& layout, uint32_t n);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_BATCH_H_
