#include "server/transport/wire.h"

namespace stoker::transport {

service::StreamSpec ToSpec(const v1::OpenStream& open) {
  service::StreamSpec spec;
  spec.dataset = open.dataset();
  spec.pipeline = open.pipeline();
  spec.batch_size = open.batch_size();
  spec.seed = open.seed();
  spec.epochs = open.epochs();
  spec.rank = open.rank();
  spec.world_size = open.world_size() == 0 ? 1 : open.world_size();
  spec.job_id = open.job_id();
  spec.drop_last = open.drop_last();
  spec.prefetch = open.prefetch();
  spec.start_epoch = open.start().epoch();
  spec.start_step = open.start().step();
  spec.end_epoch = open.end().epoch();
  spec.end_step = open.end().step();
  spec.weight = open.weight() == 0 ? 1.0 : open.weight();  // 0: unset.
  spec.hold = open.hold();
  spec.share = open.share();
  spec.ra_reps = open.ra_reps() == 0 ? 1 : open.ra_reps();  // 0: unset.
  spec.raw = open.raw();
  return spec;
}

v1::DType ToProto(tensor::DType dtype) {
  return static_cast<v1::DType>(tensor::DTypeWireNumber(dtype));
}

void ToProto(const tensor::TensorSpec& spec, v1::TensorSpec* out) {
  out->set_name(spec.name);
  out->set_dtype(ToProto(spec.dtype));
  for (int64_t d : spec.shape) out->add_shape(d);
  if (!spec.offsets_for.empty()) out->set_offsets_for(spec.offsets_for);
  if (spec.utf8) out->set_utf8(true);
}

void FillBatchMetadata(const service::ReadyBatch& batch, v1::Batch* out) {
  out->set_epoch(batch.epoch);
  out->set_step(batch.step);
  out->set_shared(batch.shared);
  for (uint64_t id : batch.sample_ids) out->add_sample_ids(id);
  for (uint64_t id : batch.skipped_ids) out->add_skipped_ids(id);
  for (uint32_t rep : batch.sample_reps) out->add_sample_reps(rep);
  for (uint32_t rep : batch.skipped_reps) out->add_skipped_reps(rep);
  for (const service::BatchTensor& t : batch.tensors) {
    v1::TensorSpec* spec = out->add_tensors();
    ToProto(t.spec, spec);
    spec->set_offset(t.offset);
    spec->set_length(t.length);
  }
  if (batch.compression == service::Compression::kZstd) {
    out->set_compression(v1::COMPRESSION_ZSTD);
    out->set_decoded_bytes(batch.decoded_bytes);
  }
}

}  // namespace stoker::transport
