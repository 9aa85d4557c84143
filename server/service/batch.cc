#include "server/service/batch.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace stoker::service {
namespace {

size_t AlignUp(size_t n) {
  return (n + BatchLayout::kAlignment - 1) / BatchLayout::kAlignment *
         BatchLayout::kAlignment;
}

}  // namespace

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

BatchLayout::BatchLayout(std::vector<tensor::TensorSpec> per_sample,
                         uint32_t batch_size)
    : specs_(std::move(per_sample)), batch_size_(batch_size) {}

size_t BatchLayout::Offset(size_t t, uint32_t n) const {
  size_t offset = 0;
  for (size_t i = 0; i < t; ++i) offset = AlignUp(offset + SampleBytes(i) * n);
  return offset;
}

size_t BatchLayout::Bytes(uint32_t n) const {
  if (specs_.empty()) return 0;
  const size_t last = specs_.size() - 1;
  return Offset(last, n) + SampleBytes(last) * n;
}

HeapBatchBuffer::HeapBatchBuffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = AlignUp(std::max<size_t>(bytes, 1));
  void* p = std::aligned_alloc(BatchLayout::kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(static_cast<uint8_t*>(p));
}

void HeapBatchBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

void CompactBatch(const BatchLayout& layout, uint8_t* base,
                  const std::vector<uint32_t>& kept) {
  const uint32_t n = static_cast<uint32_t>(kept.size());
  // Tensors only move towards the front, so going in order never overwrites
  // data that is still to be moved.
  for (size_t t = 0; t < layout.per_sample().size(); ++t) {
    const size_t sample_bytes = layout.SampleBytes(t);
    uint8_t* dst = base + layout.Offset(t, n);
    for (uint32_t j = 0; j < n; ++j) {
      const uint8_t* src = layout.SamplePtr(base, t, kept[j]);
      uint8_t* to = dst + j * sample_bytes;
      if (to != src) std::memmove(to, src, sample_bytes);
    }
  }
}

std::vector<BatchTensor> DescribeBatch(const BatchLayout& layout, uint32_t n) {
  std::vector<BatchTensor> tensors;
  for (size_t t = 0; t < layout.per_sample().size(); ++t) {
    BatchTensor bt;
    bt.spec = layout.per_sample()[t];
    bt.spec.shape.insert(bt.spec.shape.begin(), n);
    bt.offset = layout.Offset(t, n);
    bt.length = layout.SampleBytes(t) * n;
    tensors.push_back(std::move(bt));
  }
  return tensors;
}

}  // namespace stoker::service
