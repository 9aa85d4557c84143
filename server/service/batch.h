// Batch layout and the buffers batches are assembled in.
//
// A batch is one contiguous buffer holding each output slot's region back
// to back, each at a 64-byte aligned offset. Workers write every sample
// straight to its place, so the buffer a transport hands over (a gRPC slice,
// a shared-memory slot) is the one the pipeline wrote: no collate copy.
// While a batch is built, slot t of sample i lives at
//   dense:   offset(t) + i * bytes(t)
//   ragged:  offset(t) + i * max_sample_bytes(t)   (up to that many bytes)
//   offsets: offset(t) + (i + 1) * 8               (the sample's count)
//
// FinishBatch, run once every sample is written, turns that into what the
// client reads: the kept samples (those not skipped) moved to the front,
// each ragged tensor's values packed without gaps, its offsets tensor
// turned from counts into n + 1 prefix sums, and the tensors moved next to
// each other (each 64-byte aligned). For a full batch of dense tensors
// nothing moves, so a JPEG + label batch costs no more than it did.
//
// Example, batch of 3, slots {label int64 [], tokens int32 [-1] max 4 rows,
// tokens.offsets}; sample 1 skipped, samples 0 and 2 have 2 and 0 tokens:
//   built:    label @0 [a, ?, c] | tokens @64 [a0 a1 . . | ? | . . . .] |
//             offsets @128 [?, 2, ?, 0]
//   finished: label @0 [a, c] | tokens @64 [a0 a1] | offsets @128 [0, 2, 2]
#ifndef STOKER_SERVER_SERVICE_BATCH_H_
#define STOKER_SERVER_SERVICE_BATCH_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/output_slot.h"
#include "server/tensor/tensor_spec.h"

namespace stoker::service {

// Where each slot of a batch of `batch_size` samples lives while it is
// built. Immutable.
class BatchLayout {
 public:
  static constexpr size_t kAlignment = 64;
  // `n` rounded up to kAlignment: where the next tensor of a batch starts.
  static size_t AlignUp(size_t n) {
    return (n + kAlignment - 1) / kAlignment * kAlignment;
  }

  BatchLayout(std::vector<tensor::OutputSlot> slots, uint32_t batch_size);
  // Every tensor dense.
  BatchLayout(const std::vector<tensor::TensorSpec>& per_sample,
              uint32_t batch_size);

  const std::vector<tensor::OutputSlot>& slots() const { return slots_; }
  // The per-sample specs of the slots, in order (a stream header's outputs).
  const std::vector<tensor::TensorSpec>& per_sample() const { return specs_; }
  uint32_t batch_size() const { return batch_size_; }
  // Byte offset of slot t's region in the buffer.
  size_t Offset(size_t t) const { return offsets_[t]; }
  // Bytes of slot t's region: batch_size() samples (offsets: one more).
  size_t RegionBytes(size_t t) const;
  // The buffer size a batch needs.
  size_t Capacity() const { return capacity_; }
  // Where sample i writes slot t (see the file comment).
  uint8_t* SamplePtr(uint8_t* base, size_t t, uint32_t i) const {
    const tensor::OutputSlot& s = slots_[t];
    return base + offsets_[t] +
           (s.kind == tensor::OutputSlot::Kind::kOffsets
                ? (size_t{i} + 1) * sizeof(int64_t)
                : size_t{i} * s.max_sample_bytes);
  }
  // Whether any slot is ragged (FinishBatch then always moves bytes).
  bool ragged() const { return ragged_; }

 private:
  const std::vector<tensor::OutputSlot> slots_;
  const std::vector<tensor::TensorSpec> specs_;
  const uint32_t batch_size_;
  std::vector<size_t> offsets_;
  size_t capacity_ = 0;
  bool ragged_ = false;
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
  // Called before a batch is written into the buffer (not when a shared
  // run lends it one, which leaves it unwritten): a ring slot maps its
  // pages then, on its first use.
  virtual void BeforeWrite() {}
  // A batch lent by a shared run (LentBatchBuffer) reads the run's buffer,
  // and holds the stream's own: the one, or null for any other buffer...
  virtual const BatchBuffer* lender() const { return nullptr; }
  // ...and the other, taken out (null for any other buffer).
  virtual std::unique_ptr<BatchBuffer> TakeOwn() { return nullptr; }
};

// A plain heap buffer, aligned for SIMD stores.
//
// Buffers of 1 MiB and more come from, and go back to, a process-wide cache
// of freed blocks by size (up to kMaxIdleBytes in all): a grpc stream's
// buffers live as long as the stream, and a helper serves a new stream for
// every chunk of two batches. Fresh blocks from malloc are faulted in page
// by page as the batch is written (glibc hands out new addresses for them
// even when as much was freed just before), which cost a helper a tenth of
// its core (docs/performance.md).
class HeapBatchBuffer : public BatchBuffer {
 public:
  static constexpr size_t kCachedFrom = size_t{1} << 20;
  static constexpr size_t kMaxIdleBytes = size_t{256} << 20;

  explicit HeapBatchBuffer(size_t bytes);
  ~HeapBatchBuffer() override;
  HeapBatchBuffer(const HeapBatchBuffer&) = delete;
  HeapBatchBuffer& operator=(const HeapBatchBuffer&) = delete;
  uint8_t* data() override { return data_; }
  size_t capacity() const override { return bytes_; }

  // Bytes of freed blocks the cache holds now.
  static size_t IdleBytes();

 private:
  uint8_t* data_;
  size_t bytes_;
  size_t rounded_;  // What was allocated: bytes_ aligned up.
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

// How a ready batch's bytes are encoded where its transport sends them in
// its message: as built, or zstd (proto/payload_codec.h) by the delivery's
// BatchEncoder (batch_encoder.h), as OpenStream.compression asked.
enum class Compression {
  kNone,
  kZstd,
};

// A finished batch, ready for its transport.
struct ReadyBatch {
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> sample_ids;
  std::vector<uint64_t> skipped_ids;
  // With ra_reps > 1 only (else empty): the copy each entry is, parallel to
  // sample_ids and skipped_ids.
  std::vector<uint32_t> sample_reps;
  std::vector<uint32_t> skipped_reps;
  std::vector<BatchTensor> tensors;
  size_t bytes = 0;  // Payload bytes, from the start of the buffer.
  // kZstd: the first `bytes` of the buffer are the payload encoded
  // (proto/payload_codec.h), `decoded_bytes` once decoded; tensor offsets
  // are into the decoded payload. kNone: decoded_bytes == bytes.
  Compression compression = Compression::kNone;
  size_t decoded_bytes = 0;
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

// Finishes a batch built in `base` as `layout` places it (see the file
// comment): keeps the samples at positions `kept` (ascending), packs ragged
// values, writes offsets and moves the tensors together. Returns the
// tensors, each with the batch dimension first (ragged values: total rows;
// offsets: kept.size() + 1), and sets *payload_bytes to the bytes from the
// start of the buffer to the end of the last tensor. Regions only move
// towards the front, so memmove in order never overwrites bytes still to
// be read.
// REQUIRES: each kept sample's offsets entry holds a count whose rows fit
// its ragged slot (the pipeline wrote it).
std::vector<BatchTensor> FinishBatch(const BatchLayout& layout, uint8_t* base,
                                     const std::vector<uint32_t>& kept,
                                     size_t* payload_bytes);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_BATCH_H_
