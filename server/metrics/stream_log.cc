#include "server/metrics/stream_log.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/metrics/daemon_stats.h"
#include "server/metrics/log.h"

namespace stoker::metrics {

void StreamLog::OnOpen(const service::StreamSnapshot& stream,
                       uint64_t reserved_bytes,
                       std::string_view share_refused) {
  const service::StreamSpec& s = stream.spec;
  if (!share_refused.empty()) {
    Log(LogLevel::kWarning, "share_refused",
        {{"stream", absl::StrCat(stream.id)},
         {"dataset", s.dataset},
         {"pipeline", s.pipeline},
         {"job", s.job_id},
         {"reason", std::string(share_refused)}});
  }
  Log(LogLevel::kInfo, "stream_open",
      {{"stream", absl::StrCat(stream.id)},
       {"dataset", s.dataset},
       {"pipeline", s.pipeline},
       {"job", s.job_id},
       {"rank", absl::StrCat(s.rank, "/", s.world_size)},
       {"transport", s.transport},
       {"batch_size", absl::StrCat(s.batch_size)},
       {"prefetch", absl::StrCat(s.prefetch)},
       {"reserved_bytes", absl::StrCat(reserved_bytes)},
       {"start", absl::StrCat(s.start_epoch, ":", s.start_step)}});
}

void StreamLog::OnClose(const service::StreamSnapshot& stream,
                        const absl::Status& status, double seconds_open) {
  const service::StreamSpec& s = stream.spec;
  const service::CountValues& st = stream.stats.counts;
  const double wait = st.Exported(service::Count::kWaitNs);
  const double consumer = wait + st.Exported(service::Count::kBusyNs);
  // A client that cancels or leaves (a trainer killed mid-epoch) is no
  // fault of the daemon's: an info line says why, and the close is info.
  const bool cancelled = absl::IsCancelled(status);
  if (cancelled) {
    Log(LogLevel::kInfo, "stream_cancelled",
        {{"stream", absl::StrCat(stream.id)},
         {"dataset", s.dataset},
         {"reason", std::string(status.message())}});
  } else if (!status.ok()) {
    // Why it ended: for DATA_LOSS the shard file and key of the bad record.
    Log(LogLevel::kWarning, "stream_error",
        {{"stream", absl::StrCat(stream.id)},
         {"dataset", s.dataset},
         {"status", StatusCodeName(static_cast<int>(status.code()))},
         {"error", std::string(status.message())}});
  }
  std::vector<LogField> fields = {
      {"stream", absl::StrCat(stream.id)},
      {"dataset", s.dataset},
      {"pipeline", s.pipeline},
      {"job", s.job_id},
      {"rank", absl::StrCat(s.rank, "/", s.world_size)},
      {"transport", s.transport},
      {"status", StatusCodeName(static_cast<int>(status.code()))}};
  // Every count of the stream, by its name in GetStats' `counts` map.
  for (const service::CountDef& def : service::kCounts) {
    fields.emplace_back(def.name,
                        def.unit == 1
                            ? absl::StrCat(st[def.count])
                            : absl::StrFormat("%.3f", st.Exported(def.count)));
  }
  fields.emplace_back("seconds", absl::StrFormat("%.3f", seconds_open));
  fields.emplace_back("stall_share",
                      consumer > 0 ? absl::StrFormat("%.3f", wait / consumer)
                                   : std::string("-"));
  Log(status.ok() || cancelled ? LogLevel::kInfo : LogLevel::kWarning,
      "stream_close", fields);
}

void LogStorage(const std::string& dataset, const std::string& path,
                const StorageDiagnosis& d) {
  if (d.kind == StorageKind::kLocal) {
    Log(LogLevel::kInfo, "dataset_storage",
        {{"dataset", dataset},
         {"path", path},
         {"fstype", d.fstype},
         {"kind", StorageKindName(d.kind)},
         {"device", d.device}});
    return;
  }
  Log(LogLevel::kWarning, "slow_storage",
      {{"dataset", dataset},
       {"path", path},
       {"fstype", d.fstype},
       {"kind", StorageKindName(d.kind)},
       {"device", d.device},
       {"advice", d.advice}});
}

}  // namespace stoker::metrics
