// The Stoker C++ client: open a stream of batches from a stokerd on this node
// and read them as tensor views, without copies beyond gRPC's own.
//
//   auto client = stoker::Client::Connect("unix:/run/stoker/stoker.sock");
//   stoker::StreamOptions o;
//   o.dataset = "train"; o.pipeline = "train"; o.batch_size = 64;
//   auto stream = client->OpenStream(o);        // absl::StatusOr<...>
//   stoker::Batch batch;
//   while ((*stream)->Next(&batch).ok()) {
//     const stoker::TensorView* image = batch.Find("image");
//     ...                                        // image->data, image->shape
//   }                                            // OutOfRange at the end
//
// A stream survives a daemon restart: when the connection drops, or the
// daemon ends the stream UNAVAILABLE (its dataset's source failed), Next()
// reconnects with backoff and resumes at position(), the batch after the last
// one returned, until StreamOptions::reconnect_timeout has passed since the
// first failure that no batch followed; then it returns the last error.
//
// Client is thread-safe. A Stream is used by one thread at a time.
#ifndef STOKER_CLIENT_CLIENT_H_
#define STOKER_CLIENT_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stoker {

// The element type of a tensor, little-endian. kUnknown: a dtype this
// client is older than. New dtypes are added at the end, so the values of
// the others stay.
enum class DType {
  kUnknown,
  kUint8,
  kInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kInt32,
  kInt16,
  kInt8,
  kUint16,
  kBool,  // One byte, 0 or 1.
};

// numpy's name of `t` ("uint8", "float32", "bool"); "unknown" for kUnknown.
std::string_view DTypeName(DType t);

// Bytes per element; 0 for kUnknown.
size_t DTypeSize(DType t);

// A tensor of a batch, borrowed from the Batch that holds it.
struct TensorView {
  std::string name;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;  // Batch dimension first.
  // Host memory, or device memory when `device` >= 0 (cuda_ipc): then read
  // it with CUDA on that device; the host-side helpers (RaggedView's
  // accessors, Batch::ragged) must not read it.
  const uint8_t* data = nullptr;
  size_t size = 0;  // Bytes.
  // On the offsets tensor of a ragged field: the name of its values.
  std::string offsets_for;
  bool utf8 = false;  // On the values of a str field.
  int device = -1;  // The CUDA device (runtime ordinal) `data` is on, or -1.
};

// A ragged field of a batch (a variable-length array, bytes, str): its
// values, every sample's rows (or bytes) back to back, and int64 offsets,
// n + 1 of them, so that sample k is rows [offsets[k], offsets[k + 1]).
// Borrowed from the Batch.
struct RaggedView {
  TensorView values;
  TensorView offsets;
  bool utf8 = false;  // A str field: the values are UTF-8 text.

  size_t size() const {
    return offsets.shape.empty() ? 0 : offsets.shape[0] - 1;
  }
  // Sample k's rows (bytes for bytes/str): [begin, end).
  // REQUIRES: k < size().
  int64_t begin(size_t k) const { return Offset(k); }
  int64_t end(size_t k) const { return Offset(k + 1); }
  // Bytes of one row of values.
  size_t row_bytes() const;
  // Sample k's values as bytes (a str's text).
  std::string_view bytes(size_t k) const;

 private:
  int64_t Offset(size_t k) const;
};

// A stream position: the (epoch, step) of the next batch.
struct Position {
  uint64_t epoch = 0;
  uint64_t step = 0;
};

class MessagePool;

class Batch {
 public:
  Batch();
  ~Batch();
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;

  uint64_t epoch() const;
  uint64_t step() const;
  const std::vector<uint64_t>& sample_ids() const { return sample_ids_; }
  // Samples of this step that the daemon left out as corrupt.
  const std::vector<uint64_t>& skipped_ids() const { return skipped_ids_; }
  // With StreamOptions::ra_reps > 1: which copy of its sample each entry
  // is, parallel to sample_ids() and skipped_ids(); empty otherwise (every
  // entry is copy 0). An (id, rep) is delivered once per epoch.
  const std::vector<uint32_t>& sample_reps() const { return sample_reps_; }
  const std::vector<uint32_t>& skipped_reps() const { return skipped_reps_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* Find(const std::string& name) const;
  // The ragged field `name` (its values and "<name>.offsets"); NotFound
  // when the batch has no ragged field of that name.
  absl::StatusOr<RaggedView> FindRagged(const std::string& name) const;
  // Built once by a shared run and delivered to more than one stream.
  bool shared() const { return shared_; }
  // Bytes of the batch that came in its message, as sent (compressed or
  // not); 0 where the transport's memory holds them (shm).
  size_t wire_bytes() const { return wire_bytes_; }
  // The batch's bytes, decoded: what its tensors span.
  size_t payload_bytes() const { return payload_bytes_; }

 private:
  friend class Stream;
  friend class MessagePool;
  struct Message;
  // Hands a message back to the pool it came from, for reuse
  // (client/lib/stream_call.h).
  struct MessageReturn {
    void operator()(Message* message) const;
  };
  // Owns the bytes the views point to.
  std::unique_ptr<Message, MessageReturn> message_;
  std::vector<uint64_t> sample_ids_;
  std::vector<uint64_t> skipped_ids_;
  std::vector<uint32_t> sample_reps_;
  std::vector<uint32_t> skipped_reps_;
  std::vector<TensorView> tensors_;
  bool shared_ = false;
  size_t wire_bytes_ = 0;
  size_t payload_bytes_ = 0;
};

// How batch bytes travel over grpc (StreamOptions::compression).
enum class Compression {
  kNone,
  kZstd,  // Every batch zstd-compressed, level 1.
  kAuto,  // A batch compressed when sending falls behind building.
};

struct StreamOptions {
  std::string dataset;
  std::string pipeline;
  uint32_t batch_size = 0;
  uint64_t seed = 0;
  uint64_t epochs = 1;  // 0: endless.
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::string job_id;
  bool drop_last = false;
  // Repeated augmentation: each sample this many times per epoch (1..64),
  // each copy augmented differently, the copies spread over the ranks
  // (torchvision's RASampler; docs/pipeline-design.md section 4.5). The
  // ranks of a job must agree.
  uint32_t ra_reps = 1;
  uint32_t prefetch = 0;  // 0: the daemon's default.
  Position start;
  // Stop before this position, or at the end of `epochs` if that is
  // sooner; (0, 0): at the end of `epochs`.
  Position end;
  // grpc, shm, cuda_ipc, "auto" (shm, then grpc), or a list tried in
  // order, e.g. "cuda_ipc,shm,grpc"; info().transport tells which was used.
  std::string transport = "grpc";
  // shm, cuda_ipc: batches the caller keeps alive beyond the one Next()
  // replaces.
  uint32_t hold = 1;
  // cuda_ipc: the GPU the batches go to, by UUID as nvidia-smi -L prints
  // it; empty: the calling thread's current CUDA device. A batch's tensors
  // are then device memory (TensorView::device), complete when Next()
  // returns, readable on any CUDA stream; the caller's work that reads
  // them must have completed before the batch is released.
  std::string gpu_uuid;
  // How long Next() keeps reconnecting after the daemon went away or ended
  // the stream UNAVAILABLE: from the first failure; a batch delivered
  // starts the window afresh.
  std::chrono::milliseconds reconnect_timeout{30000};
  // How long opening may wait: for the daemon before Unavailable, and in
  // the daemon for memory budget or this rank's old stream before
  // ResourceExhausted or FailedPrecondition.
  std::chrono::milliseconds open_timeout{30000};
  // The job's fair share of the daemon's workers, if this stream starts
  // the job and the daemon's config names no weight for it.
  double weight = 1.0;
  // Join a shared preprocessing run: streams of other jobs with the same
  // dataset, pipeline, seed, batch size, world size, rank, drop_last and
  // ra_reps get the same batches, built once.
  bool share = false;
  // Each decoded image as its uint8 HWC rendering, before normalize,
  // layout, tensor and batch ops (OpenStream.raw): what a node asks of its
  // helpers. FailedPrecondition for a pipeline with a tensor op.
  bool raw = false;
  // grpc: how the batch bytes travel; decoded before Next() returns.
  Compression compression = Compression::kNone;
  // Called while an open waits for a dataset that the daemon is still
  // staging from its `source`, about every 5 s and once early in the wait,
  // with the daemon's line for the copy (DatasetSummary::staging: percent,
  // bytes, rate, ETA); on a thread of the stream's, never after the open
  // returns. Empty: not asked.
  std::function<void(const std::string& progress)> on_staging;
};

// What the daemon said about a stream when it opened.
struct StreamInfo {
  uint64_t num_samples = 0;
  uint64_t steps_per_epoch = 0;
  uint64_t samples_per_epoch = 0;
  uint32_t prefetch = 0;
  std::string transport;  // The one in use.
  bool shared = false;    // Joined a shared preprocessing run.
  // Asked to share, yet builds its own batches: why (no budget for a run).
  std::string share_refused;
  // shm: the daemon announces batches and takes acks on a unix socket of
  // their own (StreamHeader.notices) rather than on the gRPC call. False
  // with a daemon that predates it.
  bool notice_socket = false;
  // Why earlier transports of a fallback list were refused, or empty.
  std::string fallbacks;
};

struct ReleaseQueue;
class ClientTransport;

class Stream {
 public:
  ~Stream();
  // The next batch, in place of the one `batch` held (which is released:
  // over shm, its slot goes back to the daemon). OutOfRange after the last
  // batch; other errors as the daemon sent them (NotFound, DataLoss, ...).
  // Over shm the tensors are views into the shared ring, valid while the
  // Batch lives; keep at most StreamOptions::hold batches alive at once.
  absl::Status Next(Batch* batch);
  // Opens a stream made by Client::NewStream, as OpenStream would; within
  // StreamOptions::open_timeout. Call once.
  absl::Status Start();
  // Where a new stream would resume: the batch after the last one returned.
  Position position() const { return position_; }
  const StreamInfo& info() const { return info_; }
  // Times Next() reconnected after the daemon went away.
  int reconnects() const { return reconnects_; }
  void Cancel();
  // Unlike the rest of Stream, callable from any thread: ends the stream
  // for good, so that a Next() blocked in another thread returns Cancelled
  // soon and no reconnect follows. The owner still destroys the stream.
  void Interrupt();

 private:
  friend class Client;
  struct Call;
  Stream(class Client* client, StreamOptions options);
  absl::Status Open(std::chrono::steady_clock::time_point deadline);
  absl::Status OpenWith(int transport_number,
                        std::unique_ptr<ClientTransport> transport,
                        std::chrono::steady_clock::time_point deadline);
  absl::Status Reconnect(const absl::Status& cause);
  // Counts a stream that ended UNAVAILABLE with `cause`: OK while the
  // reconnect window is open, else the error Next() returns.
  absl::Status Failed(const absl::Status& cause);
  // Sends the acks of held batches released since the last call; where the
  // daemon takes AckLists, two to a message (see Stream::FlushReleased in
  // lib/stream.cc).
  void FlushReleased();

  Client* const client_;  // Outlives the stream.
  StreamOptions options_;
  std::unique_ptr<Call> call_;
  // Acks of released held batches (shm); shared with the batches.
  std::shared_ptr<ReleaseQueue> release_;
  StreamInfo info_;
  bool ack_list_ = false;  // The daemon takes StreamRequest.acks.
  Position position_;
  std::chrono::steady_clock::time_point last_return_;
  int reconnects_ = 0;
  // The first failure since the last batch delivered, and the failures
  // since: the reconnect window runs from it.
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  int failures_ = 0;
  // Guards the pointer call_ against Interrupt() from another thread: held
  // where the owner replaces call_, and by Interrupt().
  std::mutex interrupt_mu_;
  bool interrupted_ = false;  // Guarded by interrupt_mu_.
};

struct DatasetSummary {
  std::string name;
  uint64_t num_samples = 0;
  uint32_t num_shards = 0;
  uint64_t bytes = 0;
  std::vector<std::string> classes;
  // Which pack this is: equal on two daemons only for the same dataset.
  std::string manifest_digest;
  // Which samples these are, computed from the records: equal on two
  // daemons only for the same samples (DatasetInfo.content_digest).
  std::string content_digest;
  // While the daemon stages the dataset from its `source` and streams
  // cannot open on it yet: where the copy is ("42.0% (1.2 GiB of 2.9 GiB),
  // 35.1 MiB/s, ETA 0:48") or why it failed; empty once it is served.
  std::string staging;
};

struct PipelineSummary {
  std::string name;
  std::vector<std::string> ops;
};

namespace v1 {
class DaemonStats;  // proto/stoker/v1/stats.proto
}  // namespace v1

// TLS to a daemon's TCP listener (listen.tls). Paths of PEM files.
struct TlsOptions {
  // The CA that signed the daemon's certificate; empty: the system's roots.
  std::string ca_file;
  // This client's certificate and key, for a daemon that requires them
  // (listen.tls.client_ca). Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the daemon's certificate must carry, when it is not the host
  // of the target (e.g. dialing an IP for a certificate that names the
  // node). Empty: the target's host.
  std::string server_name;
};

class Client {
 public:
  // `target` is a gRPC target: "unix:/path/to.sock" or "host:port".
  // Plaintext; for TLS use the overload below.
  static std::unique_ptr<Client> Connect(const std::string& target);
  // TLS to "host:port". InvalidArgument, naming the file, when a PEM file
  // cannot be read or only one of cert_file and key_file is set. A daemon
  // that refuses the handshake shows up as Unavailable on the first call.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& target, const TlsOptions& tls);
  ~Client();

  // `timeout` bounds the call; 0: no bound.
  absl::StatusOr<std::vector<DatasetSummary>> ListDatasets(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  absl::StatusOr<std::vector<PipelineSummary>> ListPipelines();
  absl::StatusOr<std::unique_ptr<Stream>> OpenStream(
      const StreamOptions& options);
  // OpenStream in two steps: a stream not yet open, which Stream::Start()
  // opens. Another thread may Interrupt() it in between or during Start(),
  // which then returns Cancelled: for a caller that must not wait on a
  // daemon that accepts the connection and never answers.
  std::unique_ptr<Stream> NewStream(const StreamOptions& options);

  // The daemon's counters now (the GetStats call), as `stoker top` reads
  // them: a stoker.v1.DaemonStats, whose generated header
  // (stoker/v1/stoker.pb.h) the caller includes. Counters are cumulative:
  // call twice and take differences for rates.
  absl::Status GetStats(v1::DaemonStats* stats);

 private:
  friend class Stream;
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CLIENT_H_
