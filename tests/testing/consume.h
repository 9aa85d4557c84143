// Reads a whole stream (or its first batches) with the C++ client, keeping
// what integration tests compare: ids, per-batch bytes, positions, status.
#ifndef STOKER_TESTS_TESTING_CONSUME_H_
#define STOKER_TESTS_TESTING_CONSUME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "stoker/client.h"

namespace stoker::testing {

struct Consumed {
  std::vector<uint64_t> ids;
  std::vector<uint64_t> skipped;
  std::vector<std::string> batches;  // All tensor bytes of each batch.
  std::vector<std::pair<uint64_t, uint64_t>> positions;
  std::vector<bool> shared;  // Batch::shared() of each batch.
  Position next;
  std::string transport;  // The transport the stream ended on.
  absl::Status status;    // Of the open, or of the last Next().
};

// A stream of a TestServer's dataset through `pipeline`, with open and
// reconnect timeouts that a loaded machine meets.
StreamOptions TestStream(const std::string& pipeline, uint32_t batch_size,
                         uint64_t seed, uint64_t epochs = 1,
                         const std::string& transport = "grpc");

// Opens a stream at `target` and reads `max_batches` batches (0: all).
Consumed Consume(const std::string& target, const StreamOptions& options,
                 size_t max_batches = 0);

// All tensor bytes of a batch, in order.
std::string BatchBytes(const Batch& batch);

// Reads `stream` to its end holding the last `hold` batches, and checks
// (a test failure otherwise) after each read that every held batch still
// has the bytes it had when read: a held batch's slot is never refilled
// under it. `bytes` reads a batch (BatchBytes, or a device copy). Returns
// the batches read.
int ReadHolding(Stream& stream, size_t hold,
                const std::function<std::string(const Batch&)>& bytes);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTING_CONSUME_H_
