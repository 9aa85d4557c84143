// HelperPool: the helper daemons of this node (config `helpers`), and the
// ChunkPlacer that decides which chunks of a stream's batches they build
// (docs/remote-design.md).
//
// Placement (placement.h): local_first sends a chunk to a helper only while
// this daemon's worker pool has been saturated for a while and the stream
// needs help, and stops once the pool has not been saturated for a while;
// each helper then has as many chunks open as it delivers in time (its
// allowance: halved when one of its batches holds a consumer up, grown
// while they come in time; at most `streams`). remote_first: whenever a
// helper has fewer than `streams` chunks open. A helper sends the uint8
// rendering (OpenStream.raw) where the node can finish it, compressed as
// `compress` says, over TLS when `tls` is set.
//
// Each helper is an ordinary stokerd reached over TCP with the C++ client
// library. A helper is used only while it is up: a probe (ListDatasets)
// answered, and it holds the stream's dataset with the same content digest
// as this daemon, each computed from its own records
// (dataset/content_digest.h): a helper with other samples under the same
// name, even beside a copy of this daemon's manifest, is refused for that
// dataset, and logged once. A helper never decides that a sample is lost: a
// batch it skipped samples of is built here (Stream::TakeRemote), which
// ends its chunk as a failure. A chunk that fails marks its
// helper down; a down helper is probed again after a backoff of 1 s
// doubling to 30 s, jittered. A chunk that receives nothing for
// `stall_seconds` is cancelled: a half-dead helper counts as dead.
//
// With `helpers.dns` the monitor resolves the name at start and every
// `dns_refresh_seconds`: an address that joins the records becomes a helper
// (probed before use), one that leaves gets no new chunks and is dropped
// once its open chunks end. A failed lookup keeps the helpers it had.
//
// Thread-safe. Owns a monitor thread (lookups, probes, stall checks,
// joining ended chunks) between Start() and Stop(); a lookup blocks only
// that thread.
#ifndef STOKER_SERVER_REMOTE_HELPER_POOL_H_
#define STOKER_SERVER_REMOTE_HELPER_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/config/options.h"
#include "server/remote/chunk_reader.h"
#include "server/remote/placement.h"
#include "server/service/remote_source.h"
#include "server/service/stream.h"

namespace stoker::remote {

// The addresses "NAME:PORT" resolves to, as "IP:PORT" ("[IP]:PORT" for
// IPv6), sorted, without repeats. NotFound when the name has no address.
using HelperResolver = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::string& name_port)>;

// HelperResolver through getaddrinfo (A and AAAA records, /etc/hosts).
absl::StatusOr<std::vector<std::string>> ResolveHelpers(
    const std::string& name_port);

class HelperPool : public service::ChunkPlacer {
 public:
  // `local_saturated` answers whether this daemon's own workers are the
  // bottleneck now: more runnable tasks than workers (sampled by the
  // monitor and before each chunk). `resolve` looks up `options.dns`.
  HelperPool(config::HelperOptions options,
             std::function<bool()> local_saturated,
             HelperResolver resolve = ResolveHelpers);
  ~HelperPool() override;

  void Start();
  // Cancels open chunks and joins them. Idempotent.
  void Stop();

  uint32_t chunk_steps(uint32_t window) const override;
  std::shared_ptr<service::RemoteChunk> Place(
      const service::ChunkRequest& request,
      std::weak_ptr<service::ChunkSink> sink) override;

  std::vector<service::HelperStats> Stats() const;
  // Whether new chunks go to helpers now: always with remote_first; with
  // local_first, while the placement policy says so.
  bool placing() const;

 private:
  struct Helper;

  void Monitor();
  // Samples whether the local pool is saturated; logs a change of
  // placement.
  void SampleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resolves options_.dns and adds, relists or unlists the DNS helpers.
  void Resolve();
  void AddHelperLocked(const std::string& address, bool from_dns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks `h` for its datasets; marks it up (with their digests) or down.
  void Probe(Helper* h);
  // A chunk's reader handed a batch of `h` to its stream.
  void BatchTaken(Helper* h, bool late);
  void ChunkEnded(Helper* h, const ChunkReader::Result& result);
  void MarkDownLocked(Helper* h, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const config::HelperOptions options_;
  const std::function<bool()> local_saturated_;
  const HelperResolver resolve_;

  mutable absl::Mutex mu_;
  // Only the monitor thread removes a helper (an unlisted one with no open
  // chunk), so the helpers it probes outside mu_ stay alive.
  std::vector<std::unique_ptr<Helper>> helpers_ ABSL_GUARDED_BY(mu_);
  std::string dns_error_ ABSL_GUARDED_BY(mu_);  // The last lookup's, logged.
  PlacementPolicy policy_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Chunks not yet joined; the monitor joins the ones that finished.
  std::vector<std::shared_ptr<ChunkReader>> chunks_ ABSL_GUARDED_BY(mu_);
  size_t next_helper_ ABSL_GUARDED_BY(mu_) = 0;  // Round robin among ties.
  std::thread monitor_;
};

}  // namespace stoker::remote

#endif  // STOKER_SERVER_REMOTE_HELPER_POOL_H_
