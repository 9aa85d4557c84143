// StreamSpec: one stream as the daemon was asked for it, in plain values.
//
// Why this is not the client's stoker::StreamOptions (client/include/stoker/
// client.h): the two sit on either side of the wire (proto OpenStream), and
// each holds what only its side knows. The client's carries what it does
// alone (a transport list tried in order, reconnect timeouts, the GPU to
// map); this one carries what the daemon decides on top of the request (the
// peer, whether the transport's client holds batches, whether the images go
// out unformatted). The installed client library cannot include server/, so
// the shared fields are pinned by the wire converters (transport/wire.cc,
// client/lib/) and their tests, not by one struct.
//
// Thread-compatible (a value).
#ifndef STOKER_SERVER_SERVICE_STREAM_SPEC_H_
#define STOKER_SERVER_SERVICE_STREAM_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace stoker::service {

enum class OnCorrupt { kSkip, kFail };

struct StreamSpec {
  std::string dataset;
  std::string pipeline;
  uint32_t batch_size = 0;
  uint64_t seed = 0;
  uint64_t epochs = 1;  // 0: endless.
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::string job_id;
  bool drop_last = false;
  uint32_t ra_reps = 1;  // Copies of each sample per epoch (sampler.h).
  uint32_t prefetch = 0;  // 0: the daemon's default.
  uint64_t start_epoch = 0;
  uint64_t start_step = 0;
  // Stop before (end_epoch, end_step), or at the end of `epochs` if that is
  // sooner; (0, 0): at the end of `epochs`.
  uint64_t end_epoch = 0;
  uint64_t end_step = 0;
  double weight = 1.0;
  std::string transport = "grpc";  // Its name, for metrics and logs.
  // The client keeps batches in the transport's memory after reading them
  // (Transport::client_holds): the window grows by `hold`.
  bool client_holds = false;
  uint32_t hold = 0;  // Batches the consumer keeps beyond prefetch.
  bool share = false;  // Join a shared preprocessing run.
  std::string peer;    // Who opened it: "uid:N", "ip:ADDR" or "local".
  // Send the uint8 rendering, before the format stage (BindMode::kRendered):
  // a node's helper stream, or a stream whose transport formats the images
  // itself (Transport::formats_on_delivery).
  bool raw = false;
  // The wire encoding a request asks for (OpenStream.compression) is not
  // here: it is its delivery's (BatchEncoder, batch_encoder.h).
};

// The linear position (epoch * steps_per_epoch + step) a stream stops
// before: the sooner of `end` and the end of `epochs`; the largest uint64
// for an endless stream with no end.
uint64_t EndPosition(const StreamSpec& spec, uint64_t steps_per_epoch);

// True for the job id of a stream that a node opened on this daemon as its
// helper: such a stream never places chunks in turn.
bool IsHelperJob(std::string_view job_id);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_STREAM_SPEC_H_
