// Structured logs: one event per line on stderr, as logfmt
// (`ts=... level=info event=stream_open dataset=train ...`), which journald
// and log shippers read as is. Never written per batch or per sample; events
// that can repeat fast go through LogLimited.
//
// Thread-safe: a line is written with one call.
#ifndef STOKER_SERVER_METRICS_LOG_H_
#define STOKER_SERVER_METRICS_LOG_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stoker::metrics {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogField = std::pair<std::string_view, std::string>;

void Log(LogLevel level, std::string_view event,
         std::initializer_list<LogField> fields = {});
// The same, for fields known only at run time.
void Log(LogLevel level, std::string_view event,
         const std::vector<LogField>& fields);

// Like Log, but writes at most `per_minute` lines of `event` a minute and
// reports how many it dropped with the next line it writes.
void LogLimited(LogLevel level, std::string_view event, int per_minute,
                std::initializer_list<LogField> fields = {});

// Lines below this level are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);

// Quotes a value when logfmt needs it.
std::string LogValue(std::string_view value);

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_LOG_H_
