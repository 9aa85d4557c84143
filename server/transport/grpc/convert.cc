#include "server/transport/grpc/convert.h"

#include <vector>


namespace stoker::transport {
namespace {

// Field numbers from stoker.proto that BatchWirePrefix writes by hand.
constexpr int kResponseBatchField = 2;
constexpr int kBatchPayloadField = 15;
constexpr int kLengthDelimited = 2;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendTag(int field, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | kLengthDelimited, out);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

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
  spec.weight = open.weight() == 0 ? 1.0 : open.weight();  // 0: unset.
  spec.transport = open.transport() == v1::TRANSPORT_SHM        ? "shm"
                   : open.transport() == v1::TRANSPORT_CUDA_IPC ? "cuda_ipc"
                                                                : "grpc";
  spec.hold = open.hold();
  spec.share = open.share();
  return spec;
}

v1::DType ToProto(pipeline::DType dtype) {
  switch (dtype) {
    case pipeline::DType::kUint8:
      return v1::DTYPE_UINT8;
    case pipeline::DType::kInt64:
      return v1::DTYPE_INT64;
    case pipeline::DType::kFloat16:
      return v1::DTYPE_FLOAT16;
    case pipeline::DType::kFloat32:
      return v1::DTYPE_FLOAT32;
  }
  return v1::DTYPE_UNSPECIFIED;
}

void ToProto(const pipeline::TensorSpec& spec, v1::TensorSpec* out) {
  out->set_name(spec.name);
  out->set_dtype(ToProto(spec.dtype));
  for (int64_t d : spec.shape) out->add_shape(d);
}

bool ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                         google::protobuf::MessageLite* message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return message->ParseFromString(bytes);
}

grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

void FillBatchMetadata(const service::ReadyBatch& batch, v1::Batch* out) {
  out->set_epoch(batch.epoch);
  out->set_step(batch.step);
  out->set_shared(batch.shared);
  for (uint64_t id : batch.sample_ids) out->add_sample_ids(id);
  for (uint64_t id : batch.skipped_ids) out->add_skipped_ids(id);
  for (const service::BatchTensor& t : batch.tensors) {
    v1::TensorSpec* spec = out->add_tensors();
    ToProto(t.spec, spec);
    spec->set_offset(t.offset);
    spec->set_length(t.length);
  }
}

std::string BatchWirePrefix(const service::ReadyBatch& batch) {
  v1::Batch meta;
  FillBatchMetadata(batch, &meta);
  const std::string head = meta.SerializeAsString();
  std::string payload_header;
  AppendTag(kBatchPayloadField, &payload_header);
  AppendVarint(batch.bytes, &payload_header);
  const uint64_t batch_len = head.size() + payload_header.size() + batch.bytes;

  std::string prefix;
  prefix.reserve(head.size() + payload_header.size() + 16);
  AppendTag(kResponseBatchField, &prefix);
  AppendVarint(batch_len, &prefix);
  prefix += head;
  prefix += payload_header;
  return prefix;
}

}  // namespace stoker::transport
