#include "server/rpc/convert.h"

#include <vector>

namespace stoker::rpc {
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

void DropPayload(void* buffer) {
  delete static_cast<service::BatchBuffer*>(buffer);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
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

std::string BatchWirePrefix(const v1::Batch& meta, size_t payload_bytes) {
  const std::string head = meta.SerializeAsString();
  std::string payload_header;
  AppendTag(kBatchPayloadField, &payload_header);
  AppendVarint(payload_bytes, &payload_header);
  const uint64_t batch_len = head.size() + payload_header.size() + payload_bytes;

  std::string prefix;
  prefix.reserve(head.size() + payload_header.size() + 16);
  AppendTag(kResponseBatchField, &prefix);
  AppendVarint(batch_len, &prefix);
  prefix += head;
  prefix += payload_header;
  return prefix;
}

grpc::ByteBuffer Encode(transport::Handover handover) {
  if (handover.payload == nullptr) {
    return SerializeToByteBuffer(handover.message);
  }
  service::BatchBuffer* payload = handover.payload.release();
  grpc::Slice slices[2] = {
      grpc::Slice(BatchWirePrefix(handover.message.batch(),
                                  handover.payload_bytes)),
      grpc::Slice(payload->data(), handover.payload_bytes, &DropPayload,
                  payload)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace stoker::rpc
