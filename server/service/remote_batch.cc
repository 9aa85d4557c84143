#include "server/service/remote_batch.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::service {

absl::StatusOr<ReadyBatch> TakeHelperBatch(
    const BatchLayout& layout, uint64_t epoch, uint64_t step,
    const std::vector<uint64_t>& ids, const std::vector<uint32_t>& reps,
    bool fail_on_corrupt, const RemoteBatch& remote, uint8_t* dst,
    size_t capacity, const RenderedFinish* finish) {
  if (remote.rendered && finish == nullptr) {
    return absl::FailedPreconditionError(
        "it sent a uint8 rendering, which this stream cannot finish");
  }
  if (remote.epoch != epoch || remote.step != step) {
    return absl::FailedPreconditionError(
        absl::StrCat("sent epoch ", remote.epoch, " step ", remote.step,
                     " for epoch ", epoch, " step ", step));
  }
  // The helper's plan must be this stream's: each (id, rep) of the step is
  // either delivered or skipped, in the step's order. Reps travel only with
  // ra_reps > 1; absent, each is 0.
  const auto has_reps = [](const std::vector<uint32_t>& r,
                           const std::vector<uint64_t>& i) {
    return r.empty() || r.size() == i.size();
  };
  if (!has_reps(remote.sample_reps, remote.sample_ids) ||
      !has_reps(remote.skipped_reps, remote.skipped_ids)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "its batch for epoch ", epoch, " step ", step,
        " has sample_reps or skipped_reps of another length than its ids"));
  }
  const auto rep_at = [](const std::vector<uint32_t>& r, size_t i) {
    return r.empty() ? uint32_t{0} : r[i];
  };
  size_t kept = 0;
  size_t skipped = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t id = ids[i];
    const uint32_t rep = reps[i];
    if (kept < remote.sample_ids.size() && remote.sample_ids[kept] == id &&
        rep_at(remote.sample_reps, kept) == rep) {
      ++kept;
    } else if (skipped < remote.skipped_ids.size() &&
               remote.skipped_ids[skipped] == id &&
               rep_at(remote.skipped_reps, skipped) == rep) {
      ++skipped;
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat("its batch for epoch ", epoch, " step ", step,
                       " does not hold sample ", id,
                       rep == 0 ? std::string() : absl::StrCat(" copy ", rep),
                       " where this daemon's plan has it"));
    }
  }
  if (kept != remote.sample_ids.size() ||
      skipped != remote.skipped_ids.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("its batch for epoch ", epoch, " step ", step,
                     " holds samples this daemon's plan does not"));
  }
  // Under on_corrupt: fail, a sample the helper skipped is rebuilt here,
  // where the corrupt record fails the stream with its own message.
  if (!remote.skipped_ids.empty() && fail_on_corrupt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it skipped samples ", absl::StrJoin(remote.skipped_ids, ","),
        " as corrupt, and on_corrupt is fail"));
  }
  // Each of this daemon's outputs, in its order and of its type, packed as
  // FinishBatch packs a batch: 64-byte aligned, back to back.
  const int64_t n = static_cast<int64_t>(kept);
  const std::vector<tensor::OutputSlot>& slots =
      remote.rendered ? finish->sent->slots() : layout.slots();
  if (remote.tensors.size() != slots.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("it sent ", remote.tensors.size(),
                     " tensors where this daemon's "
                     "pipeline outputs ",
                     slots.size(), " (another pipeline definition?)"));
  }
  std::vector<BatchTensor> tensors;
  size_t end = 0;
  for (size_t t = 0; t < slots.size(); ++t) {
    const tensor::OutputSlot& slot = slots[t];
    const RemoteTensor* r = nullptr;
    for (const RemoteTensor& candidate : remote.tensors) {
      if (candidate.name == slot.spec.name) r = &candidate;
    }
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), slot.spec.shape.begin(), slot.spec.shape.end());
    bool fits = r != nullptr && r->dtype == slot.spec.dtype;
    if (fits && slot.kind == tensor::OutputSlot::Kind::kRagged) {
      // Any number of rows that the samples' room holds.
      const int64_t max_rows =
          n * static_cast<int64_t>(slot.max_sample_bytes / slot.row_bytes);
      shape.erase(shape.begin());
      fits = !r->shape.empty() && r->shape[0] >= 0 && r->shape[0] <= max_rows;
      if (fits) shape[0] = r->shape[0];
    } else if (fits && slot.kind == tensor::OutputSlot::Kind::kOffsets) {
      shape = {n + 1};
    }
    fits = fits && r->shape == shape;
    tensor::TensorSpec sent = slot.spec;
    sent.shape = shape;
    if (!fits || r->size != sent.bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "its tensor '", slot.spec.name,
          "' is not this daemon's output of that name (another pipeline "
          "definition?)"));
    }
    // This daemon's tensor: the one sent, or its formatted image.
    const bool format =
        remote.rendered && t < finish->pipeline->num_image_outputs();
    tensor::TensorSpec spec = sent;
    if (format) {
      spec = layout.slots()[t].spec;
      spec.shape.insert(spec.shape.begin(), n);
    }
    const size_t bytes = spec.bytes();
    const size_t offset = BatchLayout::AlignUp(end);
    if (offset + bytes > capacity) {
      return absl::FailedPreconditionError(
          "its batch is larger than this daemon's batch buffer");
    }
    if (format) {
      const size_t from = n > 0 ? r->size / n : 0;
      const size_t to = n > 0 ? bytes / n : 0;
      for (int64_t i = 0; i < n; ++i) {
        finish->pipeline->FormatRendered(t, r->data + i * from,
                                         dst + offset + i * to);
      }
    } else {
      std::memcpy(dst + offset, r->data, r->size);
    }
    tensors.push_back(BatchTensor{std::move(spec), offset, bytes});
    end = offset + bytes;
  }
  ReadyBatch ready;
  ready.epoch = epoch;
  ready.step = step;
  ready.sample_ids = remote.sample_ids;
  ready.skipped_ids = remote.skipped_ids;
  ready.sample_reps = remote.sample_reps;
  ready.skipped_reps = remote.skipped_reps;
  ready.tensors = std::move(tensors);
  ready.bytes = end;
  return ready;
}

}  // namespace stoker::service
