#include "server/config/config_reference.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "server/config/byte_size.h"
#include "server/config/op_config_reader.h"
#include "server/config/options.h"
#include "server/pipeline/registry.h"

namespace stoker::config {
namespace {

// One row of the reference. Rows with an empty `default_text` take their
// default from a default-constructed ServerOptions (see DefaultOf), so
// options.h stays the one place that defines defaults.
struct KeyDoc {
  absl::string_view key;
  absl::string_view type;
  absl::string_view default_text;
  absl::string_view meaning;
};

const std::vector<KeyDoc>& Keys() {
  static const auto* const keys = new std::vector<KeyDoc>{
      {"listen", "map", "required",
       "Where the gRPC service listens: at least one of `listen.unix` and "
       "`listen.tcp`."},
      {"listen.unix", "path", "none",
       "Unix socket path, relative to the config file's directory unless "
       "absolute; at most 107 bytes once resolved."},
      {"listen.tcp", "HOST:PORT", "none",
       "TCP address, e.g. `127.0.0.1:7411` or `[::1]:7411`; port 0 picks a "
       "free port. Keep it on loopback: TCP beyond the node needs TLS."},
      {"listen.unix_mode", "octal string", "",
       "Permission bits of the unix socket, e.g. `\"0660\"` (quote it)."},
      {"listen.unix_group", "group name", "the daemon's group",
       "Group that owns the unix socket (and its `.shm` descriptor socket); "
       "its members may connect when `listen.unix_mode` lets the group in."},
      {"listen.tls", "map", "none",
       "TLS on the TCP listener: `{cert: FILE, key: FILE}`, plus "
       "`client_ca` for mutual TLS. Paths are relative to the config file's "
       "directory unless absolute; the files are read at start."},
      {"listen.tls.cert", "path", "required",
       "The server's certificate chain (PEM). Clients check it against their "
       "CA, so its names (SAN) must match the address they dial."},
      {"listen.tls.key", "path", "required",
       "The private key of `listen.tls.cert` (PEM); keep it readable by the "
       "daemon's user only."},
      {"listen.tls.client_ca", "path", "none",
       "CA certificates (PEM). When set, every TCP client must present a "
       "certificate signed by one of them (mutual TLS); others are refused "
       "in the handshake."},
      {"listen.insecure_remote", "bool", "false",
       "Allow `listen.tcp` on an address beyond loopback (e.g. `0.0.0.0`) "
       "without `listen.tls`. Off, such a config is refused; on, the daemon "
       "starts and logs a warning."},
      {"workers", "`auto` or 1..1024", "",
       "Threads in the worker pool. `auto` starts one per core and lets the "
       "autotuner keep as many active as the consumers' rate and the free "
       "cores call for (gauge `stoker_autotune_workers`); a number fixes "
       "the count."},
      {"prefetch", "`auto` or `fixed`", "",
       "Prefetch depth of streams that do not ask for one. `fixed` gives "
       "them `limits.default_prefetch`; `auto` lets the autotuner move it "
       "between 2 and `limits.max_prefetch`, starting at "
       "`limits.default_prefetch`: deeper while consumers stall and the "
       "workers have slack, shallower while nobody waits (gauge "
       "`stoker_autotune_prefetch`). A stream keeps the depth it opened "
       "with."},
      {"memory_budget", "size", "",
       "Bytes the daemon may hold in decoded samples and batches at once."},
      {"device_memory_budget", "size", "",
       "Bytes of GPU memory the cuda_ipc streams may hold on each GPU at "
       "once: each stream's ring of device slots (prefetch + hold batches "
       "in the pipeline's output dtype) and its uint8 staging buffer. A "
       "stream that does not fit is refused with RESOURCE_EXHAUSTED."},
      {"on_corrupt", "`skip` or `fail`", "",
       "What a stream does on a record that fails its checksum or decode: "
       "skip it and count it, or fail the stream with DATA_LOSS."},
      {"limits", "map", "", "Bounds on what requests may ask for."},
      {"limits.max_batch_size", "integer >= 1", "",
       "Largest batch size a request may ask for."},
      {"limits.max_prefetch", "integer >= 1", "",
       "Largest prefetch depth (batches in flight) a stream may ask for; "
       "also bounds the batches an shm client may hold."},
      {"limits.default_prefetch", "integer >= 1", "",
       "Prefetch depth of a stream that does not ask; at most "
       "`limits.max_prefetch`."},
      {"limits.max_streams", "integer >= 1", "",
       "Streams open at once across all clients; opens waiting for "
       "memory budget count too."},
      {"limits.max_streams_per_peer", "integer >= 1", "",
       "Streams one peer may hold at once, waiting opens included; at "
       "most `limits.max_streams`. "
       "On the unix socket a peer is a uid (from the socket's peer "
       "credentials); over TCP, an IP address."},
      {"limits.admission_wait", "seconds, 0 to 86400", "",
       "How long a new stream waits for memory budget, or for its rank's "
       "previous stream to end, before it is refused; a request's "
       "`open_timeout` or deadline may shorten it."},
      {"limits.max_batch_bytes", "size", "",
       "Largest batch, in bytes, a request may ask for."},
      {"limits.max_decode_pixels", "integer, 1 to 268435456", "",
       "Most pixels (width x height, read from the image header before any "
       "pixel is decoded) a sample's image may have. A bigger one counts as "
       "a corrupt sample: skipped or DATA_LOSS per `on_corrupt`, with a "
       "message naming the dataset, the sample and its size. It bounds "
       "what one decode holds: at most about 12.5 bytes per pixel of the "
       "limit (a progressive CMYK JPEG keeps 8 bytes of coefficients per "
       "pixel, plus a full-scale window of 3 and its box reduction), so "
       "decode scratch memory is at most workers x 12.5 x this, outside "
       "`memory_budget` (docs/architecture.md, \"Decode memory\")."},
      {"sharing", "map", "",
       "Shared preprocessing runs (streams opened with `share: true`)."},
      {"sharing.lag_window", "integer >= 1", "",
       "Batches a consumer of a shared run may fall behind the fastest one "
       "before it is detached onto a run of its own."},
      {"helpers", "map", "none",
       "Helper daemons (other machines' stokerd, reached over TCP) that may "
       "build chunks of this daemon's batches while its own workers are the "
       "bottleneck. A helper needs the same datasets (the same packs: their "
       "manifest digests must match) and pipelines; one that fails or "
       "stalls only means this daemon builds those batches itself. See "
       "docs/remote-design.md."},
      {"helpers.addresses", "list of HOST:PORT", "[]",
       "Each helper's TCP listener (its `listen.tcp`)."},
      {"helpers.dns", "NAME:PORT", "none",
       "A DNS name whose A and AAAA records are helpers, each on PORT: a "
       "Kubernetes headless Service (deploy/kubernetes/). Resolved at start "
       "and every `dns_refresh_seconds`; an address that leaves the records "
       "gets no new chunks, one that joins is probed and used. With "
       "`addresses`, both are used."},
      {"helpers.dns_refresh_seconds", "seconds, 1 to 3600", "",
       "How often `dns` is resolved again."},
      {"helpers.placement", "`local_first` or `remote_first`", "",
       "`local_first`: local workers first; chunks go to helpers once the "
       "worker pool has had more runnable tasks than workers for "
       "`saturated_ms`, for streams whose consumer waits for data (more than "
       "`stall_share` of the last second, or nothing ready in its window), "
       "and stop once the pool has kept up for `idle_ms`. `remote_first`: "
       "whenever a helper has room (a node that should keep its cores for "
       "training)."},
      {"helpers.saturated_ms", "milliseconds", "",
       "How long the worker pool must be saturated before chunks go to "
       "helpers (`local_first`)."},
      {"helpers.idle_ms", "milliseconds", "",
       "How long the worker pool must keep up before no new chunk goes to "
       "a helper (`local_first`)."},
      {"helpers.stall_share", "0 to 1", "",
       "The share of the last second a stream's consumer must have waited "
       "for data for its chunks to go to helpers (`local_first`)."},
      {"helpers.raw", "bool", "",
       "Ask helpers for each image's uint8 rendering and normalize it here "
       "(a quarter of float32's bytes on the wire), where the pipeline has "
       "no tensor op (`random_erasing`); off, or with one, helpers send the "
       "finished outputs."},
      {"helpers.compress", "`auto`, `zstd` or `none`", "",
       "How helpers' batches travel: `auto` compresses a batch (zstd, level "
       "1) when the helper's sending falls behind its building, i.e. when "
       "the link is the bottleneck; `zstd` always; `none` never."},
      {"helpers.tls", "map", "none",
       "TLS to the helpers (their `listen.tls`): `{ca: FILE}`, plus `cert` "
       "and `key` where they require client certificates, and "
       "`server_name` when their certificates do not name the addresses "
       "dialed. Paths are relative to the config file's directory."},
      {"helpers.tls.ca", "path", "the system's roots",
       "CA certificates (PEM) that signed the helpers' certificates."},
      {"helpers.tls.cert", "path", "none",
       "This daemon's client certificate (PEM), for helpers with "
       "`listen.tls.client_ca`."},
      {"helpers.tls.key", "path", "none", "The key of `helpers.tls.cert`."},
      {"helpers.tls.server_name", "host name", "the host dialed",
       "The name the helpers' certificates must carry (e.g. a Service name "
       "when `dns` resolves to pod IPs)."},
      {"helpers.insecure", "bool", "false",
       "Plaintext to helpers beyond loopback. Off, a config with a helper "
       "address (or a `dns` name) that is not loopback and no `tls` is "
       "refused."},
      {"helpers.chunk_steps", "integer >= 1", "",
       "Consecutive batches one helper stream builds; at most half a "
       "stream's window (prefetch)."},
      {"helpers.streams", "integer >= 1", "",
       "Most chunks open on one helper at once. With `local_first` a "
       "helper's allowance starts at one, halves when one of its batches "
       "holds a consumer up and grows while they come in time, up to this "
       "(gauge `stoker_helper_chunk_allowance`)."},
      {"helpers.stall_seconds", "seconds, 0.1 to 3600", "",
       "A chunk that received nothing for this long is given up and its "
       "batches are built here."},
      {"jobs", "map of JOB_ID to map", "none",
       "Per-job settings, by the job id clients send."},
      {"jobs.JOB.weight", "number, 0.001 to 1000000", "1, or the job's request",
       "The job's fair share of the worker pool; overrides the weight its "
       "streams ask for."},
      {"metrics", "`off` or map", "off",
       "The Prometheus endpoint; `metrics: {listen: ...}` turns it on. "
       "See docs/observability.md for the metrics it serves."},
      {"metrics.listen", "HOST:PORT", "required",
       "Address of the HTTP endpoint that serves `/metrics`, e.g. "
       "`127.0.0.1:9464`; port 0 picks a free port. Keep it on loopback "
       "or a trusted network: it has no authentication."},
      {"datasets", "map of NAME to map", "required",
       "The datasets clients may name, at least one. NAME is letters, "
       "digits, `_`, `-` and `.`, starting with a letter, digit or `_`."},
      {"datasets.NAME.path", "path", "required",
       "Dataset directory written by `stoker pack`, relative to the config "
       "file's directory unless absolute; must exist when the config loads, "
       "unless the dataset has a `source`: then it is where stokerd stages "
       "the local copy (created if missing)."},
      {"datasets.NAME.source",
       "`s3://BUCKET/PREFIX`, `http(s)://HOST/PATH` "
       "or path",
       "none",
       "Where the pack is kept. stokerd copies it into `path` in the "
       "background (manifest, record indexes, then shards; checked, "
       "resumed after a kill), lists it as staging meanwhile, and serves "
       "it once it is servable; a stream opened before waits up to "
       "`limits.admission_wait` and is told the progress. See "
       "docs/storage.md, \"Staging in the daemon\"."},
      {"storage", "map", "the defaults below",
       "How datasets with a `source` are staged."},
      {"storage.cache_limit", "size", "",
       "Bytes the staged datasets may take on local disk together (0: no "
       "limit). A dataset that would exceed it evicts the least recently "
       "used staged dataset that no stream has open; datasets without a "
       "`source` are never removed. One that cannot fit fails, naming the "
       "sizes."},
      {"storage.parallel", "integer, 1 to 256", "",
       "Ranged GETs in flight per dataset being staged."},
      {"storage.chunk_size", "size, 64KiB to 1GiB", "",
       "Bytes per ranged GET."},
      {"storage.piece_size", "size, 64KiB to 1GiB", "",
       "While a dataset is served during its copy, the copy fetches each "
       "chunk in pieces of this size, asking before each for the bytes no "
       "record read by range has brought yet: larger pieces mean fewer "
       "GETs, and more bytes fetched twice (a record read while its piece "
       "is in flight)."},
      {"storage.read_parallel", "integer, 1 to 256", "",
       "Ranged GETs of records in flight per dataset served during its "
       "copy (records of shards not copied yet; each GET takes one record "
       "or neighbouring ones). The link's bandwidth times its round trip, "
       "divided by the record size, is about what keeps it busy."},
      {"storage.read_ahead", "integer, 0 to 64", "",
       "Batches of each stream's plan whose records are fetched ahead, a "
       "batch at a time in plan order, while its dataset is copied; 0: "
       "each record is fetched when a worker needs it."},
      {"storage.read_block", "size, 0 or 4KiB to 64MiB", "",
       "While a dataset is copied, a record fetched ahead of the plan brings "
       "the aligned block of this size around it into the copy's part file, "
       "and the block's other records are read from there: fewer, larger "
       "GETs (an object store's request costs and rate limits), at the cost "
       "of bytes fetched before they are needed. 0: the record alone. "
       "See docs/storage.md, \"Serving while staging\"."},
      {"storage.read_cache", "size, 1MiB to 1TiB", "",
       "Bound on the records read by range kept in memory per dataset "
       "(the oldest go first; fetches ahead take at most half of it)."},
      {"storage.retries", "integer, 0 to 20", "",
       "Times a request to a source is tried again when it may pass (HTTP "
       "5xx, 408, 429; a connection refused, cut or stalled), with waits "
       "from 200 ms doubling to 10 s; the copy and the records read by "
       "range while staging both. Then the copy fails, or a stream that "
       "needs the record ends UNAVAILABLE naming the URL and the status "
       "(a client reconnects for its reconnect_timeout)."},
      {"storage.s3", "map", "the AWS environment",
       "S3 settings that override the AWS environment variables of the "
       "daemon. Credentials are never config keys: they come from "
       "`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN` or "
       "the credentials file."},
      {"storage.s3.region", "region name", "`AWS_REGION`",
       "Overrides `AWS_REGION` and `AWS_DEFAULT_REGION`."},
      {"storage.s3.endpoint", "URL", "`AWS_ENDPOINT_URL_S3`",
       "Overrides `AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL`; requests "
       "then go path-style to ENDPOINT/BUCKET/KEY (MinIO, Ceph RGW)."},
      {"storage.s3.profile", "profile name", "`AWS_PROFILE`",
       "Overrides `AWS_PROFILE`: the profile of the credentials file."},
      {"storage.s3.credentials_file", "path", "`AWS_SHARED_CREDENTIALS_FILE`",
       "Overrides `AWS_SHARED_CREDENTIALS_FILE`; relative to the config "
       "file's directory unless absolute. Re-read when S3 refuses a request "
       "as expired."},
      {"pipelines", "map of NAME to list or map", "required",
       "The pipelines clients may name, at least one; NAME as for datasets."},
      {"pipelines.NAME", "list of ops, or map", "required",
       "The ops in order, at least one. A step is `- OP: {ARG: VALUE, ...}`, "
       "`- OP: VALUE` for an op whose table row says it takes a bare value "
       "(today `layout`), or `- OP` for an op without arguments. A map "
       "(`decode`, `views`) makes a pipeline with views: several augmented "
       "crops of each sample in one batch (DINO, SimCLR). `{preset: "
       "NAME}` takes the ops of a pipeline preset (below)."},
      {"pipelines.NAME.preset", "preset name", "none",
       "The pipeline preset whose ops this pipeline has: the file NAME.yaml "
       "of the presets folder (`--presets DIR`, `$STOKER_PRESETS`, "
       "share/stoker/presets of the install, or the source tree's "
       "config/presets)."},
      {"pipelines.NAME.decode", "list of ops", "[decode_image]",
       "With views: the decode and fields ops (decode_image, drop_fields, "
       "ragged_limit), shared by every view; the image is decoded once for "
       "all of them."},
      {"pipelines.NAME.views", "map of VIEW to list or map", "required",
       "With views, at least one, at most 16: VIEW (letters, digits, `_`, "
       "`-`) is its list of geometry, pixel, format and tensor ops, or "
       "`{count: N, ops: [...]}` for N instances (1-64), each with its own "
       "random choices. Outputs are `VIEW.FIELD`, or `VIEW.K.FIELD` (K from "
       "0) when N > 1; other fields once. Batch ops need the list form."},
  };
  return *keys;
}

// The default of `key` as it would be written in the config file.
std::string DefaultOf(absl::string_view key) {
  const ServerOptions d;
  if (key == "listen.unix_mode") {
    return absl::StrCat("\"", absl::StrFormat("%04o", d.listen.unix_mode),
                        "\"");
  }
  if (key == "workers") {
    return d.workers == 0 ? "auto" : absl::StrCat(d.workers);
  }
  if (key == "prefetch") return d.prefetch_auto ? "auto" : "fixed";
  if (key == "memory_budget") return FormatByteSize(d.memory_budget);
  if (key == "device_memory_budget") {
    return FormatByteSize(d.device_memory_budget);
  }
  if (key == "on_corrupt") {
    return d.on_corrupt == OnCorrupt::kSkip ? "skip" : "fail";
  }
  if (key == "limits") return "the defaults below";
  if (key == "limits.max_batch_size") {
    return absl::StrCat(d.limits.max_batch_size);
  }
  if (key == "limits.max_prefetch") return absl::StrCat(d.limits.max_prefetch);
  if (key == "limits.default_prefetch") {
    return absl::StrCat(d.limits.default_prefetch);
  }
  if (key == "limits.max_streams") return absl::StrCat(d.limits.max_streams);
  if (key == "limits.max_streams_per_peer") {
    return absl::StrCat(d.limits.max_streams_per_peer);
  }
  if (key == "limits.max_batch_bytes") {
    return FormatByteSize(d.limits.max_batch_bytes);
  }
  if (key == "limits.max_decode_pixels") {
    return absl::StrCat(d.limits.max_decode_pixels);
  }
  if (key == "limits.admission_wait") {
    return absl::StrCat(d.limits.admission_wait_seconds);
  }
  if (key == "helpers.placement") return "local_first";
  if (key == "helpers.dns_refresh_seconds") {
    return absl::StrCat(d.helpers.dns_refresh_seconds);
  }
  if (key == "helpers.chunk_steps") return absl::StrCat(d.helpers.chunk_steps);
  if (key == "helpers.streams") return absl::StrCat(d.helpers.streams);
  if (key == "helpers.stall_seconds") {
    return absl::StrCat(d.helpers.stall_seconds);
  }
  if (key == "helpers.saturated_ms") {
    return absl::StrCat(d.helpers.saturated_ms);
  }
  if (key == "helpers.idle_ms") return absl::StrCat(d.helpers.idle_ms);
  if (key == "helpers.stall_share") {
    return absl::StrCat(d.helpers.stall_share);
  }
  if (key == "helpers.raw") return d.helpers.raw ? "true" : "false";
  if (key == "helpers.compress") return "auto";
  if (key == "storage.cache_limit") {
    return d.storage.cache_limit == 0 ? "0 (no limit)"
                                      : FormatByteSize(d.storage.cache_limit);
  }
  if (key == "storage.parallel") return absl::StrCat(d.storage.parallel);
  if (key == "storage.retries") return absl::StrCat(d.storage.retries);
  if (key == "storage.chunk_size") {
    return FormatByteSize(d.storage.chunk_size);
  }
  if (key == "storage.piece_size") {
    return FormatByteSize(d.storage.piece_size);
  }
  if (key == "storage.read_parallel") {
    return absl::StrCat(d.storage.read_parallel);
  }
  if (key == "storage.read_ahead") return absl::StrCat(d.storage.read_ahead);
  if (key == "storage.read_cache") {
    return FormatByteSize(d.storage.read_cache);
  }
  if (key == "storage.read_block") {
    return FormatByteSize(d.storage.read_block);
  }
  if (key == "sharing") return "the defaults below";
  if (key == "sharing.lag_window") return absl::StrCat(d.sharing.lag_window);
  return "";
}

// Makes `text` safe inside a Markdown table cell.
std::string Cell(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
}

std::string ArgsCell(const pipeline::OpDef& def) {
  if (def.args.empty()) return "none";
  std::vector<std::string> parts;
  for (const pipeline::ArgSpec& spec : def.args) {
    const std::string_view type = pipeline::ArgTypeName(spec.type);
    std::string part = absl::StrCat(
        "`", spec.name, "`: ", absl::string_view(type.data(), type.size()));
    if (spec.required) {
      absl::StrAppend(&part, ", required");
    } else if (spec.default_value.has_value()) {
      absl::StrAppend(&part, " = ",
                      internal::FormatArgValue(*spec.default_value));
    }
    if (const std::string range = pipeline::RangeText(spec); !range.empty()) {
      absl::StrAppend(&part, spec.min && spec.max ? ", in " : ", ", range);
    }
    if (!spec.choices.empty()) {
      absl::StrAppend(&part, ", one of ", absl::StrJoin(spec.choices, ", "));
    }
    if (spec.name == def.scalar_arg) {
      absl::StrAppend(&part, " (also `- ", def.name, ": VALUE`)");
    }
    if (!spec.doc.empty()) absl::StrAppend(&part, " — ", spec.doc);
    parts.push_back(std::move(part));
  }
  return Cell(absl::StrJoin(parts, "<br>"));
}

}  // namespace

std::string ConfigReference() {
  std::string out =
      "## Config file reference\n"
      "\n"
      "`stokerd --config FILE` reads a YAML file with the keys below. A key "
      "not listed, a key given twice, or a value of the wrong type or out "
      "of range is an error that names the file, line and column. Sizes are "
      "written like `2GiB`, `512MiB`, `1.5GB` or `1048576` (KiB, MiB, "
      "GiB... are powers of 1024; KB, MB, GB... powers of 1000).\n"
      "\n"
      "| key | type | default | meaning |\n"
      "|---|---|---|---|\n";
  for (const KeyDoc& doc : Keys()) {
    const std::string default_text = doc.default_text.empty()
                                         ? DefaultOf(doc.key)
                                         : std::string(doc.default_text);
    absl::StrAppend(&out, "| `", doc.key, "` | ", Cell(doc.type), " | ",
                    Cell(default_text), " | ", Cell(doc.meaning), " |\n");
  }

  absl::StrAppend(&out,
                  "\n"
                  "### Pipeline ops\n"
                  "\n"
                  "Each op's kind fixes where it may stand: decode, then "
                  "geometry, then format ops. An argument outside its range "
                  "or choices is an error at its line and column.\n"
                  "\n"
                  "| op | kind | arguments | example | meaning |\n"
                  "|---|---|---|---|---|\n");
  const pipeline::OpRegistry& registry = pipeline::OpRegistry::Global();
  std::vector<std::string> names = registry.Names();
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const pipeline::OpDef* def = registry.Find(name);
    if (def == nullptr) continue;
    const std::string_view kind = pipeline::OpKindName(def->kind);
    absl::StrAppend(&out, "| `", name, "` | ",
                    absl::string_view(kind.data(), kind.size()), " | ",
                    ArgsCell(*def), " | `", Cell(def->example), "` | ",
                    Cell(def->doc), " |\n");
  }
  return out;
}

std::vector<std::string> AllowedKeys(absl::string_view section) {
  std::vector<std::string> keys;
  for (const KeyDoc& doc : Keys()) {
    absl::string_view rest = doc.key;
    if (!section.empty()) {
      if (rest.size() <= section.size() + 1 ||
          rest.substr(0, section.size()) != section ||
          rest[section.size()] != '.') {
        continue;
      }
      rest.remove_prefix(section.size() + 1);
    }
    if (rest.find('.') == absl::string_view::npos) keys.emplace_back(rest);
  }
  return keys;
}

}  // namespace stoker::config
