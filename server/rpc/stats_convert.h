// Converts the daemon's stats snapshot (metrics::DaemonStats, plain values)
// to the GetStats reply (stoker.v1.DaemonStats). Pure; thread-compatible.
#ifndef STOKER_SERVER_RPC_STATS_CONVERT_H_
#define STOKER_SERVER_RPC_STATS_CONVERT_H_

#include "server/metrics/daemon_stats.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker::rpc {

void ToProto(const metrics::DaemonStats& stats, v1::DaemonStats* out);

}  // namespace stoker::rpc

#endif  // STOKER_SERVER_RPC_STATS_CONVERT_H_
