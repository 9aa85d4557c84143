#include "server/metrics/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stoker::metrics {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

struct Limiter {
  absl::Mutex mu;
  struct Window {
    absl::Time start;
    int written = 0;
    int dropped = 0;
  };
  std::map<std::string, Window, std::less<>> windows ABSL_GUARDED_BY(mu);
};

Limiter& GetLimiter() {
  static Limiter* limiter = new Limiter;
  return *limiter;
}

void Write(LogLevel level, std::string_view event, const LogField* begin,
           const LogField* end, int dropped) {
  // Debian's absl::string_view is not std::string_view: build with +=.
  std::string line = "ts=" + absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ",
                                              absl::Now(), absl::UTCTimeZone());
  line += " level=";
  line += LevelName(level);
  line += " event=";
  line += event;
  for (const LogField* f = begin; f != end; ++f) {
    line += ' ';
    line += f->first;
    line += '=';
    line += LogValue(f->second);
  }
  if (dropped > 0) line += " suppressed=" + std::to_string(dropped);
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

std::string LogValue(std::string_view value) {
  const bool plain = !value.empty() &&
                     value.find_first_of(" =\"\n\t") == std::string_view::npos;
  if (plain) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

void SetLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

void Log(LogLevel level, std::string_view event,
         std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level) return;
  Write(level, event, fields.begin(), fields.end(), 0);
}

void Log(LogLevel level, std::string_view event,
         const std::vector<LogField>& fields) {
  if (static_cast<int>(level) < g_min_level) return;
  Write(level, event, fields.data(), fields.data() + fields.size(), 0);
}

void LogLimited(LogLevel level, std::string_view event, int per_minute,
                std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_min_level) return;
  Limiter& limiter = GetLimiter();
  int dropped = 0;
  {
    absl::MutexLock lock(&limiter.mu);
    auto it = limiter.windows.find(event);
    if (it == limiter.windows.end()) {
      it = limiter.windows.emplace(std::string(event), Limiter::Window{}).first;
    }
    Limiter::Window& w = it->second;
    const absl::Time now = absl::Now();
    if (now - w.start >= absl::Minutes(1)) {
      dropped = w.dropped;
      w = Limiter::Window{now, 0, 0};
    }
    if (w.written >= per_minute) {
      ++w.dropped;
      return;
    }
    ++w.written;
  }
  Write(level, event, fields.begin(), fields.end(), dropped);
}

}  // namespace stoker::metrics
