#include "client/lib/staging_watch.h"

#include <utility>
#include <vector>

#include "stoker/client.h"

namespace stoker {

StagingWatch::StagingWatch(
    Client* client, std::string dataset,
    std::function<void(const std::string& progress)> report)
    : client_(client),
      dataset_(std::move(dataset)),
      report_(std::move(report)) {
  if (report_) thread_ = std::thread([this] { Run(); });
}

StagingWatch::~StagingWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool StagingWatch::WaitDone(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [this] { return done_; });
}

void StagingWatch::Run() {
  if (WaitDone(kFirstLook)) return;
  do {
    absl::StatusOr<std::vector<DatasetSummary>> datasets =
        client_->ListDatasets(kLookTimeout);
    // A daemon that cannot be asked: the open itself reports that.
    if (!datasets.ok()) continue;
    for (const DatasetSummary& d : *datasets) {
      if (d.name != dataset_ || d.staging.empty()) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) report_(d.staging);
    }
  } while (!WaitDone(kEvery));
}

}  // namespace stoker
