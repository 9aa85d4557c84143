// StagingWatch: while a stream's open waits in the daemon, reports how far
// the copy of its dataset is, if the daemon is staging it.
//
// The daemon makes an open on a dataset it is still copying from its
// `source` wait, and says nothing on the call until the wait ends. So the
// watch asks on the side, on the same channel: ListDatasets, whose
// DatasetInfo.staging is the daemon's own line for the copy ("42.0% (1.2
// GiB of 2.9 GiB), 35.1 MiB/s, ETA 0:48"), first kFirstLook into the open
// (an open that is not waiting has its header by then, and costs no extra
// call) and then every kEvery, handing each non-empty answer to the
// callback. docs/storage.md says why a side call rather than a message in
// the open protocol.
//
// Thread-safety: the callback runs on the watch's own thread, never after
// the destructor returns; the destructor waits for a look in flight (at
// most kLookTimeout).
#ifndef STOKER_CLIENT_LIB_STAGING_WATCH_H_
#define STOKER_CLIENT_LIB_STAGING_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace stoker {

class Client;

class StagingWatch {
 public:
  static constexpr std::chrono::milliseconds kFirstLook{250};
  static constexpr std::chrono::milliseconds kEvery{5000};
  static constexpr std::chrono::milliseconds kLookTimeout{1000};

  // Starts watching `dataset` on `client` (borrowed for the watch's life).
  // An empty `report` watches nothing.
  StagingWatch(Client* client, std::string dataset,
               std::function<void(const std::string& progress)> report);
  ~StagingWatch();
  StagingWatch(const StagingWatch&) = delete;
  StagingWatch& operator=(const StagingWatch&) = delete;

 private:
  void Run();
  // Waits up to `d`; true once the watch is over.
  bool WaitDone(std::chrono::milliseconds d);

  Client* const client_;
  const std::string dataset_;
  const std::function<void(const std::string&)> report_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // Guarded by mu_.
  std::thread thread_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LIB_STAGING_WATCH_H_
