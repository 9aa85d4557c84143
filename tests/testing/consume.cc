#include "tests/testing/consume.h"

#include <chrono>
#include <deque>
#include <utility>

#include "gtest/gtest.h"

namespace stoker::testing {

std::string BatchBytes(const Batch& batch) {
  std::string bytes;
  for (const TensorView& t : batch.tensors()) {
    bytes.append(reinterpret_cast<const char*>(t.data), t.size);
  }
  return bytes;
}

int ReadHolding(Stream& stream, size_t hold,
                const std::function<std::string(const Batch&)>& bytes) {
  std::deque<std::pair<Batch, std::string>> held;
  Batch batch;
  int read = 0;
  while (stream.Next(&batch).ok()) {
    ++read;
    std::string copy = bytes(batch);
    held.emplace_back(std::move(batch), std::move(copy));
    for (const auto& [b, was] : held) {
      if (bytes(b) != was) {
        ADD_FAILURE() << "a held batch changed under its holder at batch "
                      << read;
        return read;
      }
    }
    if (held.size() > hold) held.pop_front();
  }
  return read;
}

StreamOptions TestStream(const std::string& pipeline, uint32_t batch_size,
                         uint64_t seed, uint64_t epochs,
                         const std::string& transport) {
  StreamOptions o;
  o.transport = transport;
  o.dataset = "train";
  o.pipeline = pipeline;
  o.batch_size = batch_size;
  o.seed = seed;
  o.epochs = epochs;
  o.open_timeout = std::chrono::seconds(10);
  o.reconnect_timeout = std::chrono::seconds(10);
  return o;
}

Consumed Consume(const std::string& target, const StreamOptions& options,
                 size_t max_batches) {
  Consumed out;
  auto client = Client::Connect(target);
  auto stream = client->OpenStream(options);
  if (!stream.ok()) {
    out.status = stream.status();
    return out;
  }
  out.transport = (*stream)->info().transport;
  Batch batch;
  while (max_batches == 0 || out.batches.size() < max_batches) {
    out.status = (*stream)->Next(&batch);
    if (!out.status.ok()) break;
    out.ids.insert(out.ids.end(), batch.sample_ids().begin(),
                   batch.sample_ids().end());
    out.skipped.insert(out.skipped.end(), batch.skipped_ids().begin(),
                       batch.skipped_ids().end());
    out.batches.push_back(BatchBytes(batch));
    out.positions.emplace_back(batch.epoch(), batch.step());
    out.shared.push_back(batch.shared());
  }
  out.next = (*stream)->position();
  return out;
}

}  // namespace stoker::testing
