// The daemon's configuration as plain values: what `stokerd --config FILE`
// reads from YAML (see config_loader.h) and hands to the composition root.
//
// These are value types with no behaviour. Defaults here are the defaults of
// the config file: config_reference.cc prints them from a default-constructed
// ServerOptions, so change them here and the reference follows.
//
// Thread-safety: plain structs; const access from many threads is safe.

#ifndef STOKER_SERVER_CONFIG_OPTIONS_H_
#define STOKER_SERVER_CONFIG_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/pipeline/pipeline.h"

namespace stoker::config {

// Where the gRPC service listens. At least one of unix_path and tcp is set.
struct ListenOptions {
  // Absolute path of the unix socket; empty if none. A relative path in the
  // config file is resolved against the config file's directory.
  std::string unix_path;
  // "HOST:PORT" (or "[V6ADDR]:PORT"); empty if no TCP listener. Port 0 asks
  // the kernel for a free port.
  std::string tcp;
  // Permission bits given to the unix socket.
  uint32_t unix_mode = 0660;
  // Group that owns the unix socket; empty keeps the daemon's group.
  std::string unix_group;
  // TLS on the TCP listener: absolute paths of PEM files. `cert` and `key`
  // are both set or both empty (no TLS); they are only set with `tcp`.
  // A non-empty `client_ca` turns on mutual TLS: a client must present a
  // certificate signed by it. The unix socket never uses TLS.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Allows `tcp` on an address beyond loopback without TLS. Without it the
  // loader refuses such a listener.
  bool insecure_remote = false;
};

// The Prometheus endpoint.
struct MetricsOptions {
  bool enabled = false;
  // "HOST:PORT"; set exactly when enabled.
  std::string listen;
};

// Bounds on what one request or one client may ask for. A request outside a
// bound gets INVALID_ARGUMENT or RESOURCE_EXHAUSTED naming the bound.
struct Limits {
  uint32_t max_batch_size = 4096;
  uint32_t max_prefetch = 64;
  // Prefetch depth of a stream that does not ask for one; <= max_prefetch.
  uint32_t default_prefetch = 4;
  uint32_t max_streams = 256;
  // Streams one peer (process) may hold at once; <= max_streams.
  uint32_t max_streams_per_peer = 64;
  uint64_t max_batch_bytes = 1ull << 30;
  // Seconds a new stream may wait for memory budget (or for its rank's old
  // stream to end) before it is refused.
  double admission_wait_seconds = 30;
  // Most pixels (width x height, from the image header) a sample's image may
  // have; a bigger one is a corrupt sample (on_corrupt). It bounds the
  // memory one decode holds: docs/architecture.md, "Decode memory".
  uint64_t max_decode_pixels = pipeline::kDefaultMaxDecodePixels;
};

// Shared preprocessing runs (streams opened with share: true).
struct SharingOptions {
  // Batches a consumer may lag behind the fastest consumer of its run
  // before it is detached onto a run of its own.
  uint32_t lag_window = 8;
};

// Helper daemons that may build chunks of this daemon's batches
// (docs/remote-design.md). No addresses and no dns: every batch is built
// here.
struct HelperOptions {
  // "HOST:PORT" of each helper's TCP listener, in config order; unique.
  std::vector<std::string> addresses;
  // "NAME:PORT": every address NAME resolves to (A and AAAA records, as a
  // Kubernetes headless Service lists its pods) is a helper on PORT.
  // Resolved again every dns_refresh_seconds; empty: none.
  std::string dns;
  double dns_refresh_seconds = 30;
  // local_first: chunks go to helpers once this daemon's worker pool has
  // had more runnable tasks than workers for saturated_ms, and stop once
  // it has not for idle_ms; meanwhile a stream's chunk goes out only while
  // its consumer waited for data more than stall_share of the last second,
  // or no finished batch waits in its window. remote_first: whenever a
  // helper has room.
  enum class Placement { kLocalFirst, kRemoteFirst };
  Placement placement = Placement::kLocalFirst;
  double saturated_ms = 200;
  double idle_ms = 1000;
  double stall_share = 0.02;
  // Ask helpers for the uint8 rendering, finished here (normalize, layout,
  // the batch op), where the pipeline has no tensor op; else the outputs.
  bool raw = true;
  // How helpers' batches travel: auto compresses a batch when the helper's
  // sending falls behind its building.
  enum class Compress { kAuto, kZstd, kNone };
  Compress compress = Compress::kAuto;
  // TLS to the helpers (their listen.tls); PEM paths, absolute. Without
  // tls_ca the system's roots are trusted. Plaintext without any of these.
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  // Plaintext to helpers that are not on loopback. Off, such a config is
  // refused: batches and the helper's stream would cross the network in
  // the clear.
  bool insecure = false;
  // Batches per chunk; a stream's chunks are at most half its window.
  // Two measured best at prefetch 8 and 16 (docs/performance.md): a longer
  // chunk makes the stream wait longer for its helper.
  uint32_t chunk_steps = 2;
  // Chunks open on one helper at once.
  uint32_t streams = 4;
  // A chunk that received nothing for this long is given up and built here.
  double stall_seconds = 5;
};

// What the daemon does with a record that fails its checksum or decode.
enum class OnCorrupt { kSkip, kFail };

struct DatasetOptions {
  // The name clients use in requests.
  std::string name;
  // Absolute, lexically normal path of the dataset directory; it existed and
  // was a directory when the config was loaded.
  std::string path;
  // 1-based line of the dataset's entry in the config file.
  int line = 0;
  // Where the pack is kept (`s3://BUCKET/PREFIX`, `http(s)://HOST/PATH` or a
  // local folder or mount), as written; empty if none. With a source,
  // `path` is where stokerd stages the local copy, and need not exist yet.
  std::string source;
};

// Staging datasets with a `source` onto local disk (docs/storage.md).
struct StorageOptions {
  // Bytes the staged datasets (those with a source) may take on local disk
  // together; 0: no limit.
  uint64_t cache_limit = 0;
  // Ranged GETs in flight per staged dataset, and the bytes of each. While
  // the dataset is served, each GET is a piece (`piece_size`): 16 of 512
  // KiB keep a 240 MB/s link 20 ms away busy (docs/storage.md).
  uint32_t parallel = 16;
  uint64_t chunk_size = uint64_t{16} << 20;
  // Serving while staging (docs/storage.md): the copy fetches each chunk
  // in pieces of `piece_size`; records of shards not copied yet are read
  // by `read_parallel` ranged GETs at a time, `read_ahead` batches of each
  // stream's plan ahead, and at most `read_cache` bytes of them are kept.
  uint64_t piece_size = uint64_t{512} << 10;
  uint32_t read_parallel = 32;
  uint32_t read_ahead = 8;
  uint64_t read_cache = uint64_t{512} << 20;
  // A record fetched ahead brings the aligned block of this many bytes
  // around it into the copy's part file; 0: the record alone.
  uint64_t read_block = uint64_t{256} << 10;
  // Retries of a request to the source that may pass (storage/retry.h).
  uint32_t retries = 5;
  // S3 settings that override the AWS environment variables; empty: the
  // variable (or its default) applies. Secrets are never config keys: they
  // come from the environment or the credentials file only.
  std::string s3_region;            // Over AWS_REGION.
  std::string s3_endpoint;          // Over AWS_ENDPOINT_URL_S3.
  std::string s3_profile;           // Over AWS_PROFILE.
  std::string s3_credentials_file;  // Over AWS_SHARED_CREDENTIALS_FILE.
};

struct PipelineOptions {
  // The name clients use in requests.
  std::string name;
  // The ops in order, names and argument types checked against the op
  // registry. Arguments are as written (defaults not filled in), and the
  // pipeline was accepted by pipeline::Pipeline::Create. With views (the
  // map form), `ops` is the decode list, which may be empty
  // (pipeline::PipelineConfig).
  std::vector<pipeline::OpConfig> ops;
  std::vector<pipeline::ViewConfig> views;
  // 1-based line of the pipeline's entry in the config file.
  int line = 0;
};

struct ServerOptions {
  // The config file's path as given (or the source name given to
  // LoadConfigString); error messages and logs use it.
  std::string source;
  ListenOptions listen;
  // Threads in the worker pool; 0 (`auto`) means one per core, of which the
  // autotuner keeps as many active as the consumers' rate and the free cores
  // call for (server/service/autotuner.h).
  int workers = 0;
  // `prefetch: auto`: the autotuner picks the depth of streams that ask for
  // none, starting at limits.default_prefetch. Off (`fixed`): they get
  // limits.default_prefetch.
  bool prefetch_auto = false;
  // Bytes the daemon may hold in decoded samples and batches at once.
  uint64_t memory_budget = 2ull << 30;
  // Device memory the cuda_ipc streams may hold on each GPU at once: their
  // rings of device slots and staging buffers.
  uint64_t device_memory_budget = 2ull << 30;
  OnCorrupt on_corrupt = OnCorrupt::kSkip;
  Limits limits;
  SharingOptions sharing;
  // Fair-share weight by job id; a job not named takes the weight its
  // first stream asks for (1 by default).
  std::map<std::string, double> job_weights;
  MetricsOptions metrics;
  HelperOptions helpers;
  StorageOptions storage;
  // In config file order; names are unique. Never empty once loaded.
  std::vector<DatasetOptions> datasets;
  // In config file order; names are unique. Never empty once loaded.
  std::vector<PipelineOptions> pipelines;
};

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_OPTIONS_H_
