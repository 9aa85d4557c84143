#include "server/metrics/metrics_exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace stoker::metrics {
namespace {

// Connects to and leaves host:port once; errors are of no interest.
void Knock(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) != 1 ||
        v4->sin_addr.s_addr == htonl(INADDR_ANY)) {
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    len = sizeof(*v4);
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&addr), len);
  close(fd);
}

// The host part of "HOST:PORT" or "[V6]:PORT".
std::string HostOf(const std::string& listen) {
  if (!listen.empty() && listen[0] == '[') {
    return listen.substr(1, listen.find(']') - 1);
  }
  return listen.substr(0, listen.rfind(':'));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& listen, StatsCollectable::Source source) {
  std::unique_ptr<MetricsExposer> m(new MetricsExposer());
  m->collectable_ = std::make_shared<StatsCollectable>(std::move(source));
  std::unique_ptr<prometheus::Exposer> exposer;
  // civetweb throws when it cannot bind: this is its edge.
  try {
    exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics.listen ", listen,
                     ": cannot serve /metrics there (in use, or no "
                     "permission): ",
                     e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  m->port_ = ports.empty() ? 0 : ports.front();
  m->host_ = HostOf(listen);
  exposer->RegisterCollectable(m->collectable_);
  absl::MutexLock lock(&m->mu_);
  m->exposer_ = std::move(exposer);
  return m;
}

MetricsExposer::~MetricsExposer() { Stop(); }

void MetricsExposer::Stop() {
  std::unique_ptr<prometheus::Exposer> exposer;
  {
    absl::MutexLock lock(&mu_);
    exposer = std::move(exposer_);
  }
  if (exposer == nullptr) return;
  // civetweb's listener polls in 2 s quanta and notices the stop only when
  // a poll returns: knock on its port until it has gone, so stopping takes
  // milliseconds, not seconds.
  std::atomic<bool> stopped{false};
  std::thread knocker([this, &stopped] {
    while (!stopped) {
      Knock(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // Joins civetweb's threads, after any scrape in progress.
  exposer.reset();
  stopped = true;
  knocker.join();
}

}  // namespace stoker::metrics
