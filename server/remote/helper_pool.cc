#include "server/remote/helper_pool.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/base/clock.h"
#include "server/metrics/log.h"

namespace stoker::remote {
namespace {

using metrics::Log;
using metrics::LogLevel;

constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);
// An up helper is asked again this often, so a repacked dataset is seen.
constexpr absl::Duration kReprobe = absl::Seconds(10);
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
// The monitor's period, and so how often the pool's load is sampled.
constexpr absl::Duration kTick = absl::Milliseconds(50);

Position AtLinear(uint64_t pos, uint64_t steps_per_epoch) {
  return Position{pos / steps_per_epoch, pos % steps_per_epoch};
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveHelpers(
    const std::string& name_port) {
  const size_t colon = name_port.rfind(':');
  std::string host = name_port.substr(0, colon);
  const std::string port = name_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("helpers.dns: ", host, ": ", gai_strerror(rc)));
  }
  std::set<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, ip, sizeof(ip), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
      continue;
    }
    addresses.insert(a->ai_family == AF_INET6
                         ? absl::StrCat("[", ip, "]:", port)
                         : absl::StrCat(ip, ":", port));
  }
  freeaddrinfo(found);
  if (addresses.empty()) {
    return absl::NotFoundError(
        absl::StrCat("helpers.dns: ", host, " has no address"));
  }
  return std::vector<std::string>(addresses.begin(), addresses.end());
}

namespace {

// The client of one helper: plaintext, or TLS as `options` say.
absl::StatusOr<std::unique_ptr<Client>> ConnectHelper(
    const std::string& address, const config::HelperOptions& options) {
  if (!options.tls) return Client::Connect(address);
  TlsOptions tls;
  tls.ca_file = options.tls_ca;
  tls.cert_file = options.tls_cert;
  tls.key_file = options.tls_key;
  tls.server_name = options.tls_server_name;
  return Client::Connect(address, tls);
}

stoker::Compression CompressionOf(config::HelperOptions::Compress c) {
  switch (c) {
    case config::HelperOptions::Compress::kZstd:
      return stoker::Compression::kZstd;
    case config::HelperOptions::Compress::kNone:
      return stoker::Compression::kNone;
    case config::HelperOptions::Compress::kAuto:
      break;
  }
  return stoker::Compression::kAuto;
}

PlacementPolicy::Options PolicyOptions(const config::HelperOptions& o) {
  PlacementPolicy::Options p;
  p.saturated_for = absl::Milliseconds(o.saturated_ms);
  p.idle_for = absl::Milliseconds(o.idle_ms);
  p.stall_share = o.stall_share;
  return p;
}

}  // namespace

struct HelperPool::Helper {
  // Constant after construction.
  std::string address;
  // Null when it could not be made (a TLS file unreadable since the
  // config was loaded): the helper stays down, `connect_error` says why.
  std::unique_ptr<Client> client;
  absl::Status connect_error;
  bool from_dns = false;
  // Bumped by its chunks' readers; outlives them (the monitor drops a
  // helper only once none of its chunks is open).
  HelperCounters counters;
  // Guarded by the pool's mu_.
  bool listed = true;  // A DNS helper: in the latest lookup's records.
  bool up = false;
  // Dataset -> content digest (empty when the helper has none).
  std::map<std::string, std::string> digests;
  std::set<std::string> refused;  // Datasets logged as refused.
  absl::Time next_probe = absl::InfinitePast();
  absl::Duration backoff = kFirstBackoff;
  // local_first: the chunks it may have open, at most options.streams.
  // Halved when one of its batches holds a consumer up, grown by one per
  // allowance's worth of batches that come in time (AIMD), so a helper
  // gets as much of a stream's window as it builds in time.
  double allowance = 1;
  // Its chunks that ended at a batch that skipped samples, since the last
  // one it delivered whole.
  int skipped_in_a_row = 0;
  service::HelperStats stats;  // Its counts are in `counters`.
};

HelperPool::HelperPool(config::HelperOptions options,
                       std::function<bool()> local_saturated,
                       HelperResolver resolve)
    : options_(std::move(options)),
      local_saturated_(std::move(local_saturated)),
      resolve_(std::move(resolve)),
      policy_(PolicyOptions(options_)) {
  absl::MutexLock lock(&mu_);
  for (const std::string& address : options_.addresses) {
    AddHelperLocked(address, /*from_dns=*/false);
  }
}

void HelperPool::AddHelperLocked(const std::string& address, bool from_dns) {
  auto h = std::make_unique<Helper>();
  h->address = address;
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectHelper(address, options_);
  if (client.ok()) {
    h->client = *std::move(client);
  } else {
    h->connect_error = client.status();
  }
  h->from_dns = from_dns;
  h->stats.address = address;
  helpers_.push_back(std::move(h));
}

void HelperPool::Resolve() {
  absl::StatusOr<std::vector<std::string>> addresses = resolve_(options_.dns);
  absl::MutexLock lock(&mu_);
  if (!addresses.ok()) {
    // Keep the helpers of the last good lookup: a DNS hiccup is no reason
    // to stop using them. Logged when the error changes.
    const std::string error = addresses.status().ToString();
    if (error != dns_error_) {
      dns_error_ = error;
      Log(LogLevel::kWarning, "helpers_dns_failed",
          {{"name", options_.dns}, {"reason", error}});
    }
    return;
  }
  dns_error_.clear();
  const std::set<std::string> now(addresses->begin(), addresses->end());
  std::set<std::string> known;
  bool changed = false;
  for (auto& h : helpers_) {
    known.insert(h->address);
    if (!h->from_dns) continue;
    const bool listed = now.count(h->address) > 0;
    changed |= listed != h->listed;
    h->listed = listed;
  }
  for (const std::string& address : now) {
    if (known.count(address) == 0) {
      AddHelperLocked(address, /*from_dns=*/true);
      changed = true;
    }
  }
  if (changed) {
    Log(LogLevel::kInfo, "helpers_resolved",
        {{"name", options_.dns},
         {"addresses", absl::StrJoin(*addresses, ",")}});
  }
}

HelperPool::~HelperPool() { Stop(); }

void HelperPool::Start() {
  monitor_ = std::thread([this] { Monitor(); });
}

void HelperPool::Stop() {
  std::vector<std::shared_ptr<ChunkReader>> chunks;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    chunks.swap(chunks_);
  }
  for (auto& c : chunks) c->Cancel();
  if (monitor_.joinable()) monitor_.join();
  // Their threads call ChunkEnded on this pool: none may outlive it.
  for (auto& c : chunks) c->Join();
}

uint32_t HelperPool::chunk_steps(uint32_t window) const {
  return std::max<uint32_t>(1, std::min(options_.chunk_steps, window / 2));
}

std::shared_ptr<service::RemoteChunk> HelperPool::Place(
    const service::ChunkRequest& request,
    std::weak_ptr<service::ChunkSink> sink) {
  if (request.begin >= request.end) return nullptr;
  const service::StreamSpec& spec = *request.spec;
  const bool local_first =
      options_.placement == config::HelperOptions::Placement::kLocalFirst;
  absl::MutexLock lock(&mu_);
  if (stopping_ || helpers_.empty()) return nullptr;
  if (local_first) {
    SampleLocked();
    if (!policy_.Wants(request)) return nullptr;
  }
  Helper* best = nullptr;
  for (size_t k = 0; k < helpers_.size(); ++k) {
    Helper* h = helpers_[(next_helper_ + k) % helpers_.size()].get();
    const uint32_t room =
        local_first ? static_cast<uint32_t>(h->allowance) : options_.streams;
    if (!h->listed || !h->up || h->stats.open_chunks >= room) continue;
    auto digest = h->digests.find(spec.dataset);
    if (digest == h->digests.end() || request.content_digest.empty() ||
        digest->second != request.content_digest) {
      if (h->refused.insert(spec.dataset).second) {
        h->stats.last_error = absl::StrCat(
            "dataset '", spec.dataset, "' ",
            digest == h->digests.end()
                ? "is not served there"
                : absl::StrCat(
                      "there has content digest ",
                      digest->second.empty() ? "(none)" : digest->second,
                      ", here ",
                      request.content_digest.empty()
                          ? "(none)"
                          : std::string(request.content_digest),
                      " (other samples under its name)"),
            ": not used for it");
        Log(LogLevel::kWarning, "helper_refused",
            {{"helper", h->address},
             {"dataset", spec.dataset},
             {"reason", h->stats.last_error}});
      }
      continue;
    }
    if (best == nullptr || h->stats.open_chunks < best->stats.open_chunks) {
      best = h;
    }
  }
  if (best == nullptr) return nullptr;
  next_helper_ = (next_helper_ + 1) % helpers_.size();

  StreamOptions o;
  o.dataset = spec.dataset;
  o.pipeline = spec.pipeline;
  o.batch_size = spec.batch_size;
  o.seed = spec.seed;
  o.epochs = spec.epochs;
  o.rank = spec.rank;
  o.world_size = spec.world_size;
  o.job_id = absl::StrCat("helper:", spec.job_id);
  o.drop_last = spec.drop_last;
  o.ra_reps = spec.ra_reps;
  o.weight = spec.weight;
  // The helper builds the whole chunk at once, into its own memory.
  o.prefetch = static_cast<uint32_t>(request.end - request.begin);
  o.start = AtLinear(request.begin, request.steps_per_epoch);
  o.end = AtLinear(request.end, request.steps_per_epoch);
  o.transport = "grpc";
  o.raw = options_.raw && request.can_finish_rendered;
  o.compression = CompressionOf(options_.compress);
  // A node does not wait for a helper: it builds the batches itself. The
  // open may wait this long for a helper that just went away to answer.
  o.reconnect_timeout = std::chrono::milliseconds(0);
  o.open_timeout = std::chrono::milliseconds(1000);
  Helper* const h = best;
  auto reader = std::make_shared<ChunkReader>(
      h->client.get(), &h->counters, std::move(o), request.begin, request.end,
      std::move(sink), [this, h](bool late) { BatchTaken(h, late); },
      [this, h](const ChunkReader::Result& r) { ChunkEnded(h, r); });
  ++h->stats.open_chunks;
  ++h->stats.chunks;
  chunks_.push_back(reader);
  reader->Start();
  return reader;
}

void HelperPool::SampleLocked() {
  if (!policy_.Sample(absl::Now(), local_saturated_())) return;
  Log(LogLevel::kInfo, "helpers_placing",
      {{"remote", policy_.remote() ? "on" : "off"},
       {"reason", policy_.remote()
                      ? "the worker pool has been saturated"
                      : "the worker pool keeps up"}});
}

bool HelperPool::placing() const {
  if (options_.placement == config::HelperOptions::Placement::kRemoteFirst) {
    return true;
  }
  absl::MutexLock lock(&mu_);
  return policy_.remote();
}

void HelperPool::BatchTaken(Helper* h, bool late) {
  absl::MutexLock lock(&mu_);
  if (late) {
    ++h->stats.late;
    h->allowance = std::max(1.0, h->allowance / 2);
  } else {
    h->allowance = std::min<double>(options_.streams,
                                    h->allowance + 1 / h->allowance);
  }
}

void HelperPool::ChunkEnded(Helper* h, const ChunkReader::Result& result) {
  absl::MutexLock lock(&mu_);
  --h->stats.open_chunks;
  if (result.status.ok()) {
    h->skipped_in_a_row = 0;
    return;
  }
  // Cancelled: the node stream ended or the daemon stops; not the helper's
  // fault.
  if (absl::IsCancelled(result.status)) return;
  ++h->stats.failures;
  h->stats.rebuilt += result.undelivered;
  if (result.skipped && ++h->skipped_in_a_row < 2) {
    // Its batch skipped samples: this chunk is built here and the helper
    // keeps its next ones, since one corrupt record must not cost a node its
    // helper. Two such chunks in a row (limits or a decoder that differ)
    // mark it down like any other failure.
    h->stats.last_error = result.status.ToString();
    Log(LogLevel::kWarning, "helper_skipped",
        {{"helper", h->address}, {"reason", h->stats.last_error}});
    return;
  }
  h->skipped_in_a_row = 0;
  MarkDownLocked(h, result.status.ToString());
}

void HelperPool::MarkDownLocked(Helper* h, const std::string& why) {
  // A helper that was never up (a refused TLS handshake, a wrong address)
  // is logged too, once per reason, not at every probe.
  const bool changed = h->up || why != h->stats.last_error;
  h->stats.last_error = why;
  if (h->up) {
    h->up = false;
    h->stats.up = false;
    h->backoff = kFirstBackoff;
    h->next_probe = absl::Now() + h->backoff;
  }
  if (changed) {
    Log(LogLevel::kWarning, "helper_down",
        {{"helper", h->address}, {"reason", why}});
  }
}

void HelperPool::Probe(Helper* h) {
  absl::StatusOr<std::vector<DatasetSummary>> datasets =
      h->client == nullptr
          ? absl::StatusOr<std::vector<DatasetSummary>>(h->connect_error)
          : h->client->ListDatasets(absl::ToChronoMilliseconds(kProbeTimeout));
  absl::MutexLock lock(&mu_);
  if (!datasets.ok()) {
    const bool was_up = h->up;
    MarkDownLocked(h, datasets.status().ToString());
    if (!was_up) {
      // Exponential backoff with jitter, so that helpers that went down
      // together are not all probed at the same instant.
      static thread_local std::minstd_rand jitter(std::random_device{}());
      h->backoff = std::min(kMaxBackoff, h->backoff * 2);
      h->next_probe =
          absl::Now() + h->backoff * (0.75 + 0.5 * (jitter() % 1000) / 1000.0);
    }
    return;
  }
  std::map<std::string, std::string> digests;
  for (const DatasetSummary& d : *datasets) {
    digests[d.name] = d.content_digest;
  }
  if (digests != h->digests) h->refused.clear();
  h->digests = std::move(digests);
  h->next_probe = absl::Now() + kReprobe;
  if (!h->up) {
    h->up = true;
    h->stats.up = true;
    Log(LogLevel::kInfo, "helper_up",
        {{"helper", h->address},
         {"datasets", absl::StrCat(h->digests.size())}});
  }
}

void HelperPool::Monitor() {
  const int64_t stall_ns = static_cast<int64_t>(options_.stall_seconds * 1e9);
  const absl::Duration refresh = absl::Seconds(options_.dns_refresh_seconds);
  absl::Time next_lookup = absl::InfinitePast();
  for (;;) {
    if (!options_.dns.empty() && absl::Now() >= next_lookup) {
      Resolve();
      next_lookup = absl::Now() + refresh;
    }
    std::vector<Helper*> due;
    std::vector<std::shared_ptr<ChunkReader>> ended;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kTick)) return;
      if (options_.placement ==
          config::HelperOptions::Placement::kLocalFirst) {
        SampleLocked();
      }
      // A helper gone from the records is dropped once nothing of it is
      // open: no chunk reader will call ChunkEnded on it again.
      helpers_.erase(std::remove_if(helpers_.begin(), helpers_.end(),
                                    [](const std::unique_ptr<Helper>& h) {
                                      return !h->listed &&
                                             h->stats.open_chunks == 0;
                                    }),
                     helpers_.end());
      if (!helpers_.empty()) next_helper_ %= helpers_.size();
      const absl::Time now = absl::Now();
      for (auto& h : helpers_) {
        if (h->listed && h->next_probe <= now) due.push_back(h.get());
      }
      const int64_t now_ns = NowNs();
      for (auto it = chunks_.begin(); it != chunks_.end();) {
        if ((*it)->finished()) {
          ended.push_back(std::move(*it));
          it = chunks_.erase(it);
          continue;
        }
        ++it;
      }
      for (auto& c : chunks_) {
        if (c->StalledFor(now_ns, stall_ns)) {
          c->GiveUp(absl::DeadlineExceededError(
              absl::StrCat("no batch for ", options_.stall_seconds, " s")));
        }
      }
    }
    ended.clear();  // Their threads have ended: the joins return at once.
    for (Helper* h : due) Probe(h);
  }
}

std::vector<service::HelperStats> HelperPool::Stats() const {
  absl::MutexLock lock(&mu_);
  std::vector<service::HelperStats> out;
  for (const auto& h : helpers_) {
    service::HelperStats s = h->stats;
    s.allowance =
        options_.placement == config::HelperOptions::Placement::kLocalFirst
            ? std::floor(h->allowance)
            : options_.streams;
    const HelperCounters& c = h->counters;
    s.batches = c.batches;
    s.samples = c.samples;
    s.wire_bytes = c.wire_bytes;
    s.payload_bytes = c.payload_bytes;
    s.wait_seconds = c.wait_ns * 1e-9;
    s.copy_seconds = c.copy_ns * 1e-9;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stoker::remote
