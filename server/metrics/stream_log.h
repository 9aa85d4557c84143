// StreamLog: writes one structured log line when a stream opens and one when
// it closes (never per batch; a stream that fails or is cancelled gets one
// more saying why), and the storage warnings of datasets:
//
//   level=info event=stream_open stream=3 dataset=train pipeline=train
//     job=j1 rank=0/2 transport=grpc batch_size=64 prefetch=4
//     reserved_bytes=...
//   level=info event=stream_close stream=3 ... status=OK samples=2000
//     batches=32 skipped=0 seconds=4.210 stall_share=0.031
//   level=info event=stream_cancelled stream=4 dataset=train
//     reason="the client cancelled the call, left, or its connection closed"
//     (before its stream_close ... status=CANCELLED, when a client leaves)
//   level=warning event=slow_storage dataset=train fstype=nfs4 kind=network
//     advice="... copy it to the node's local SSD ..."
//
// Thread-safe: stateless; each line is written with one call.
#ifndef STOKER_SERVER_METRICS_STREAM_LOG_H_
#define STOKER_SERVER_METRICS_STREAM_LOG_H_

#include <string>
#include <string_view>

#include "server/metrics/storage_probe.h"
#include "server/service/stream_service.h"

namespace stoker::metrics {

class StreamLog final : public service::StreamObserver {
 public:
  void OnOpen(const service::StreamSnapshot& stream, uint64_t reserved_bytes,
              std::string_view share_refused) override;
  void OnClose(const service::StreamSnapshot& stream,
               const absl::Status& status, double seconds_open) override;
};

// Logs where a dataset lives: a warning with the remedy when the storage is
// a network filesystem or a spinning disk, an info line otherwise.
void LogStorage(const std::string& dataset, const std::string& path,
                const StorageDiagnosis& diagnosis);

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_STREAM_LOG_H_
