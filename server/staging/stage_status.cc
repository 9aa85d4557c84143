#include "server/staging/stage_status.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::staging {
namespace {

std::string Bytes(double n) {
  if (n >= 1073741824.0) return absl::StrFormat("%.1f GiB", n / 1073741824.0);
  if (n >= 1048576.0) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  if (n >= 1024.0) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%.0f B", n);
}

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(std::ceil(seconds));
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

}  // namespace

double StageStatus::eta_seconds() const {
  if (rate <= 0 || bytes_done >= bytes_total) {
    return bytes_done >= bytes_total && bytes_total > 0 ? 0 : -1;
  }
  return static_cast<double>(bytes_total - bytes_done) / rate;
}

const char* StateName(StageStatus::State state) {
  switch (state) {
    case StageStatus::State::kStarting:
      return "starting";
    case StageStatus::State::kWaiting:
      return "waiting";
    case StageStatus::State::kCopying:
      return "copying";
    case StageStatus::State::kComplete:
      return "complete";
    case StageStatus::State::kFailed:
      return "failed";
    case StageStatus::State::kStopped:
      return "stopped";
  }
  return "unknown";
}

std::string DescribeProgress(const StageStatus& s) {
  switch (s.state) {
    case StageStatus::State::kStarting:
      return absl::StrCat("reading the manifest of ", s.source);
    case StageStatus::State::kWaiting:
      return absl::StrCat("waiting for another process that is staging ",
                          s.path);
    case StageStatus::State::kFailed:
      return absl::StrCat("failed: ", s.error.message());
    case StageStatus::State::kStopped:
      return "stopped";
    default:
      break;
  }
  const double eta = s.eta_seconds();
  return absl::StrFormat("%.1f%% (%s of %s), %s/s, ETA %s", s.percent(),
                         Bytes(static_cast<double>(s.bytes_done)),
                         Bytes(static_cast<double>(s.bytes_total)),
                         Bytes(s.rate), eta < 0 ? "--:--" : Clock(eta));
}

std::string ErrorClass(const absl::Status& s) {
  const absl::string_view m = s.message();
  const size_t at = m.find(": HTTP ");
  if (at != absl::string_view::npos && m.size() >= at + 10) {
    const absl::string_view code = m.substr(at + 7, 3);
    if (absl::ascii_isdigit(code[0]) && absl::ascii_isdigit(code[1]) &&
        absl::ascii_isdigit(code[2])) {
      return std::string(code);
    }
  }
  if (absl::IsUnavailable(s)) return "transport";
  return absl::AsciiStrToLower(absl::StatusCodeToString(s.code()));
}

}  // namespace stoker::staging
