#include "server/service/batch.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker::service {
std::unique_ptr<BatchBuffer> HeapBufferSource::Take() {
  if (taken_.fetch_add(1) >= count_) {
    taken_.fetch_sub(1);
    return nullptr;
  }
  return std::make_unique<HeapBatchBuffer>(bytes_);
}

std::unique_ptr<BatchBuffer> ReclaimBuffer(
    std::unique_ptr<BatchBuffer> buffer) {
  if (buffer->lender() != nullptr) {
    return buffer->TakeOwn();
  }
  return buffer;
}

namespace {

std::vector<tensor::OutputSlot> DenseSlots(
    const std::vector<tensor::TensorSpec>& specs) {
  std::vector<tensor::OutputSlot> slots;
  for (const tensor::TensorSpec& spec : specs) {
    slots.push_back(tensor::OutputSlot::Dense(spec));
  }
  return slots;
}

std::vector<tensor::TensorSpec> SpecsOf(
    const std::vector<tensor::OutputSlot>& slots) {
  std::vector<tensor::TensorSpec> specs;
  for (const tensor::OutputSlot& slot : slots) specs.push_back(slot.spec);
  return specs;
}

}  // namespace

BatchLayout::BatchLayout(std::vector<tensor::OutputSlot> slots,
                         uint32_t batch_size)
    : slots_(std::move(slots)),
      specs_(SpecsOf(slots_)),
      batch_size_(batch_size) {
  size_t offset = 0;
  for (size_t t = 0; t < slots_.size(); ++t) {
    offset = BatchLayout::AlignUp(offset);
    offsets_.push_back(offset);
    offset += RegionBytes(t);
    ragged_ = ragged_ || slots_[t].kind != tensor::OutputSlot::Kind::kDense;
  }
  capacity_ = offset;
}

BatchLayout::BatchLayout(const std::vector<tensor::TensorSpec>& per_sample,
                         uint32_t batch_size)
    : BatchLayout(DenseSlots(per_sample), batch_size) {}

size_t BatchLayout::RegionBytes(size_t t) const {
  const tensor::OutputSlot& s = slots_[t];
  if (s.kind == tensor::OutputSlot::Kind::kOffsets) {
    return (size_t{batch_size_} + 1) * sizeof(int64_t);
  }
  return size_t{batch_size_} * s.max_sample_bytes;
}

namespace {

// Freed blocks of HeapBatchBuffers, by size. Thread-safe.
class BlockCache {
 public:
  static BlockCache& Get() {
    static BlockCache* const cache = new BlockCache();  // Never destroyed.
    return *cache;
  }

  // A freed block of exactly `bytes`, or null.
  void* Take(size_t bytes) {
    absl::MutexLock lock(&mu_);
    auto it = idle_.find(bytes);
    if (it == idle_.end()) return nullptr;
    void* block = it->second;
    idle_.erase(it);
    idle_bytes_ -= bytes;
    return block;
  }

  // Keeps `block` of `bytes` if the cache has room; frees it otherwise.
  void Give(void* block, size_t bytes) {
    {
      absl::MutexLock lock(&mu_);
      if (idle_bytes_ + bytes <= HeapBatchBuffer::kMaxIdleBytes) {
        idle_.emplace(bytes, block);
        idle_bytes_ += bytes;
        return;
      }
    }
    std::free(block);
  }

  size_t idle_bytes() {
    absl::MutexLock lock(&mu_);
    return idle_bytes_;
  }

 private:
  absl::Mutex mu_;
  std::multimap<size_t, void*> idle_ ABSL_GUARDED_BY(mu_);
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

HeapBatchBuffer::HeapBatchBuffer(size_t bytes)
    : data_(nullptr),
      bytes_(bytes),
      rounded_(BatchLayout::AlignUp(std::max<size_t>(bytes, 1))) {
  void* p = rounded_ >= kCachedFrom ? BlockCache::Get().Take(rounded_)
                                    : nullptr;
  if (p == nullptr) p = std::aligned_alloc(BatchLayout::kAlignment, rounded_);
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
}

HeapBatchBuffer::~HeapBatchBuffer() {
  if (rounded_ >= kCachedFrom) {
    BlockCache::Get().Give(data_, rounded_);
  } else {
    std::free(data_);
  }
}

size_t HeapBatchBuffer::IdleBytes() { return BlockCache::Get().idle_bytes(); }

std::vector<BatchTensor> FinishBatch(const BatchLayout& layout, uint8_t* base,
                                     const std::vector<uint32_t>& kept,
                                     size_t* payload_bytes) {
  using Kind = tensor::OutputSlot::Kind;
  const uint32_t n = static_cast<uint32_t>(kept.size());
  const bool moves = n != layout.batch_size() || layout.ragged();
  std::vector<BatchTensor> tensors(layout.slots().size());
  // Each ragged slot's total rows, for its values tensor's shape; set when
  // its offsets slot is finished, which comes after it.
  std::vector<int64_t> rows(layout.slots().size(), 0);
  size_t end = 0;
  for (size_t t = 0; t < layout.slots().size(); ++t) {
    const tensor::OutputSlot& slot = layout.slots()[t];
    BatchTensor& bt = tensors[t];
    bt.spec = slot.spec;
    bt.offset = moves ? BatchLayout::AlignUp(end) : layout.Offset(t);
    uint8_t* const dst = base + bt.offset;
    switch (slot.kind) {
      case Kind::kDense: {
        const size_t bytes = slot.max_sample_bytes;
        for (uint32_t j = 0; moves && j < n; ++j) {
          const uint8_t* src = layout.SamplePtr(base, t, kept[j]);
          uint8_t* to = dst + j * bytes;
          if (to != src) std::memmove(to, src, bytes);
        }
        bt.spec.shape.insert(bt.spec.shape.begin(), n);
        bt.length = bytes * n;
        break;
      }
      case Kind::kRagged: {
        // Its offsets slot comes next and holds each sample's count.
        const size_t counts = t + 1;
        size_t packed = 0;
        for (uint32_t j = 0; j < n; ++j) {
          int64_t count = 0;
          std::memcpy(&count, layout.SamplePtr(base, counts, kept[j]),
                      sizeof(count));
          const size_t bytes = static_cast<size_t>(count) * slot.row_bytes;
          const uint8_t* src = layout.SamplePtr(base, t, kept[j]);
          if (dst + packed != src) std::memmove(dst + packed, src, bytes);
          packed += bytes;
          rows[t] += count;
        }
        bt.spec.shape[0] = rows[t];
        bt.length = packed;
        break;
      }
      case Kind::kOffsets: {
        // Counts are read at (kept[j] + 1) and prefix sums written at
        // (j + 1) <= (kept[j] + 1), from a region that only moved forward:
        // a write never lands on a count still to be read.
        int64_t sum = 0;
        for (uint32_t j = 0; j < n; ++j) {
          int64_t count = 0;
          std::memcpy(&count, layout.SamplePtr(base, t, kept[j]),
                      sizeof(count));
          sum += count;
          std::memcpy(dst + (size_t{j} + 1) * sizeof(int64_t), &sum,
                      sizeof(sum));
        }
        const int64_t zero = 0;
        std::memcpy(dst, &zero, sizeof(zero));
        bt.spec.shape = {static_cast<int64_t>(n) + 1};
        bt.length = (size_t{n} + 1) * sizeof(int64_t);
        break;
      }
    }
    end = bt.offset + bt.length;
  }
  *payload_bytes = end;
  return tensors;
}

}  // namespace stoker::service
