#include "server/config/config_loader.h"

#include <sys/un.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/catalog_reader.h"
#include "server/config/helpers_reader.h"
#include "server/config/storage_reader.h"
#include "server/config/config_reference.h"
#include "server/config/value_readers.h"
#include "server/config/yaml_util.h"
#include "server/pipeline/worker_pool.h"

namespace stoker::config {
namespace {

namespace fs = std::filesystem;
using internal::Describe;
using internal::Diagnostics;
using internal::ExpectMap;
using internal::MapEntry;
using internal::ReadAddress;
using internal::ReadCount;
using internal::ReadFileMode;
using internal::ReadMap;
using internal::ReadSize;
using internal::ReadString;

constexpr int64_t kMaxWorkers = 1024;  // A typo guard, not a real limit.
// sockaddr_un::sun_path holds the path and its terminating NUL.
constexpr size_t kMaxUnixPath = sizeof(sockaddr_un::sun_path) - 1;

// Reads one parsed YAML document into ServerOptions, collecting every
// mistake in diag_. One instance per load; not thread-safe.
class ConfigReader {
 public:
  // `base_dir` is the absolute directory relative paths resolve against.
  ConfigReader(std::string source, fs::path base_dir, std::string presets)
      : base_dir_(std::move(base_dir)),
        presets_dir_(std::move(presets)),
        diag_(source) {
    options_.source = std::move(source);
  }

  absl::StatusOr<ServerOptions> Read(const YAML::Node& root);

 private:
  void ReadListen(const MapEntry& entry);
  void ReadTls(const MapEntry& entry);
  void ReadWorkers(const MapEntry& entry);
  void ReadPrefetch(const MapEntry& entry);
  void ReadOnCorrupt(const MapEntry& entry);
  void ReadLimits(const MapEntry& entry);
  void ReadMetrics(const MapEntry& entry);
  void ReadSharing(const MapEntry& entry);
  void ReadJobs(const MapEntry& entry);

  const fs::path base_dir_;
  const std::string presets_dir_;
  Diagnostics diag_;
  ServerOptions options_;
};

absl::StatusOr<ServerOptions> ConfigReader::Read(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) {
    diag_.Error(YAML::Mark::null_mark(),
                "the config is empty; expected a map with at least listen, "
                "datasets and pipelines");
    return diag_.ToStatus();
  }
  if (!root.IsMap()) {
    diag_.Error(root.Mark(), absl::StrCat("the config is ", Describe(root),
                                          "; expected a map of keys like "
                                          "`listen:` and `datasets:`"));
    return diag_.ToStatus();
  }
  std::set<std::string> seen;
  for (const MapEntry& entry : ReadMap(root, "", AllowedKeys(""), diag_)) {
    seen.insert(entry.key);
    if (entry.key == "listen") {
      ReadListen(entry);
    } else if (entry.key == "workers") {
      ReadWorkers(entry);
    } else if (entry.key == "prefetch") {
      ReadPrefetch(entry);
    } else if (entry.key == "memory_budget") {
      if (auto size = ReadSize(entry, "memory_budget", diag_)) {
        options_.memory_budget = *size;
      }
    } else if (entry.key == "device_memory_budget") {
      if (auto size = ReadSize(entry, "device_memory_budget", diag_)) {
        options_.device_memory_budget = *size;
      }
    } else if (entry.key == "on_corrupt") {
      ReadOnCorrupt(entry);
    } else if (entry.key == "limits") {
      ReadLimits(entry);
    } else if (entry.key == "metrics") {
      ReadMetrics(entry);
    } else if (entry.key == "sharing") {
      ReadSharing(entry);
    } else if (entry.key == "helpers") {
      internal::ReadHelpers(entry, base_dir_, &options_.helpers, diag_);
    } else if (entry.key == "storage") {
      internal::ReadStorage(entry, base_dir_, &options_.storage, diag_);
    } else if (entry.key == "jobs") {
      ReadJobs(entry);
    } else if (entry.key == "datasets") {
      options_.datasets = internal::ReadDatasets(entry, base_dir_, diag_);
    } else if (entry.key == "pipelines") {
      options_.pipelines = internal::ReadPipelines(entry, presets_dir_, diag_);
    }
  }
  static constexpr std::pair<absl::string_view, absl::string_view> kRequired[] =
      {{"listen", "listen: {unix: /run/stoker/stoker.sock}"},
       {"datasets", "datasets: {train: {path: /data/train}}"},
       {"pipelines",
        "pipelines: {train: [decode_jpeg, center_crop: {size: 224}]}"}};
  for (const auto& [key, example] : kRequired) {
    if (seen.count(std::string(key)) != 0) continue;
    diag_.Error(root.Mark(), absl::StrCat("missing required key '", key,
                                          "'; expected e.g. `", example, "`"));
  }
  if (!diag_.ok()) return diag_.ToStatus();
  return std::move(options_);
}

void ConfigReader::ReadListen(const MapEntry& entry) {
  if (!ExpectMap(entry, "listen", "{unix: /run/stoker/stoker.sock}", diag_)) {
    return;
  }
  bool has_unix = false;
  bool has_tcp = false;
  std::optional<MapEntry> unix_only;  // A unix_* key, which needs unix.
  std::optional<MapEntry> tls;
  YAML::Mark tcp_mark = entry.value_mark;
  for (const MapEntry& e :
       ReadMap(entry.value, "listen", AllowedKeys("listen"), diag_)) {
    if (e.key == "unix") {
      has_unix = true;
      std::optional<std::string> path =
          ReadString(e, "listen.unix", "a path", diag_);
      if (!path) continue;
      std::string resolved = internal::ResolvePath(base_dir_, *path);
      if (resolved.size() > kMaxUnixPath) {
        diag_.Error(e.value_mark,
                    absl::StrCat("listen.unix: socket path '", resolved,
                                 "' is ", resolved.size(),
                                 " bytes; expected at most ", kMaxUnixPath,
                                 " (the limit of a unix socket address)"));
        continue;
      }
      options_.listen.unix_path = std::move(resolved);
    } else if (e.key == "tcp") {
      has_tcp = true;
      tcp_mark = e.value_mark;
      if (auto address = ReadAddress(e, "listen.tcp", diag_)) {
        options_.listen.tcp = *address;
      }
    } else if (e.key == "unix_mode") {
      if (!unix_only) unix_only = e;
      if (auto mode = ReadFileMode(e, "listen.unix_mode", diag_)) {
        options_.listen.unix_mode = *mode;
      }
    } else if (e.key == "unix_group") {
      if (!unix_only) unix_only = e;
      if (auto group =
              ReadString(e, "listen.unix_group", "a group name", diag_)) {
        options_.listen.unix_group = *group;
      }
    } else if (e.key == "tls") {
      tls = e;
      ReadTls(e);
    } else if (e.key == "insecure_remote") {
      if (auto value =
              internal::ReadBool(e, "listen.insecure_remote", diag_)) {
        options_.listen.insecure_remote = *value;
      }
    }
  }
  if (!has_unix && !has_tcp) {
    diag_.Error(entry.value_mark,
                "listen has neither unix nor tcp; expected at least one, like "
                "{unix: /run/stoker/stoker.sock}");
  } else if (!has_unix && unix_only) {
    diag_.Error(unix_only->key_node.Mark(),
                absl::StrCat("listen.", unix_only->key,
                             " is set but listen.unix is not; expected it "
                             "only with a unix socket"));
  }
  if (tls && !has_tcp) {
    diag_.Error(tls->key_node.Mark(),
                "listen.tls is set but listen.tcp is not; TLS applies to the "
                "TCP listener only (the unix socket is guarded by its mode "
                "and group)");
  }
  const std::string& tcp = options_.listen.tcp;
  if (!tcp.empty() && !tls && !options_.listen.insecure_remote &&
      !internal::IsLoopbackAddress(tcp)) {
    diag_.Error(tcp_mark,
                absl::StrCat("listen.tcp: ", tcp,
                             " is reachable beyond this node and has no TLS; "
                             "set listen.tls {cert, key} (and client_ca for "
                             "client certificates), listen on 127.0.0.1, or "
                             "set listen.insecure_remote: true to accept "
                             "plaintext from the network"));
  }
}

void ConfigReader::ReadTls(const MapEntry& entry) {
  if (!ExpectMap(entry, "listen.tls", "{cert: server.pem, key: server.key}",
                 diag_)) {
    return;
  }
  ListenOptions& listen = options_.listen;
  for (const MapEntry& e :
       ReadMap(entry.value, "listen.tls", AllowedKeys("listen.tls"), diag_)) {
    const std::string key = absl::StrCat("listen.tls.", e.key);
    std::optional<std::string> path =
        ReadString(e, key, "a path to a PEM file", diag_);
    if (!path) continue;
    std::string resolved = internal::ResolvePath(base_dir_, *path);
    if (e.key == "cert") listen.tls_cert = std::move(resolved);
    if (e.key == "key") listen.tls_key = std::move(resolved);
    if (e.key == "client_ca") listen.tls_client_ca = std::move(resolved);
  }
  const std::pair<const char*, const std::string*> kRequired[] = {
      {"cert", &listen.tls_cert}, {"key", &listen.tls_key}};
  for (const auto& [name, value] : kRequired) {
    if (!value->empty()) continue;
    diag_.Error(entry.value_mark,
                absl::StrCat("listen.tls has no ", name,
                             "; expected {cert: server.pem, key: server.key}"));
  }
}

void ConfigReader::ReadWorkers(const MapEntry& entry) {
  const YAML::Node& value = entry.value;
  if (value.IsScalar()) {
    if (value.Scalar() == "auto") {
      options_.workers = 0;
      return;
    }
    const std::optional<int64_t> count = internal::ParseInt(value.Scalar());
    if (count && *count >= 1 && *count <= kMaxWorkers) {
      options_.workers = static_cast<int>(*count);
      return;
    }
  }
  diag_.Error(entry.value_mark,
              absl::StrCat("workers: expected auto or a number of threads "
                           "from 1 to ",
                           kMaxWorkers, ", got ", Describe(value)));
}

void ConfigReader::ReadPrefetch(const MapEntry& entry) {
  const YAML::Node& value = entry.value;
  if (value.IsScalar() && value.Scalar() == "auto") {
    options_.prefetch_auto = true;
  } else if (value.IsScalar() && value.Scalar() == "fixed") {
    options_.prefetch_auto = false;
  } else {
    diag_.Error(entry.value_mark,
                absl::StrCat("prefetch: expected auto or fixed (the depth "
                             "itself is limits.default_prefetch), got ",
                             Describe(value)));
  }
}

void ConfigReader::ReadOnCorrupt(const MapEntry& entry) {
  const YAML::Node& value = entry.value;
  if (value.IsScalar() && value.Scalar() == "skip") {
    options_.on_corrupt = OnCorrupt::kSkip;
  } else if (value.IsScalar() && value.Scalar() == "fail") {
    options_.on_corrupt = OnCorrupt::kFail;
  } else {
    diag_.Error(entry.value_mark,
                absl::StrCat("on_corrupt: expected skip or fail, got ",
                             Describe(value)));
  }
}

void ConfigReader::ReadLimits(const MapEntry& entry) {
  if (!ExpectMap(entry, "limits", "{max_batch_size: 4096}", diag_)) return;
  const size_t errors_before = diag_.error_count();
  Limits& limits = options_.limits;
  std::map<std::string, YAML::Mark> marks;
  for (const MapEntry& e :
       ReadMap(entry.value, "limits", AllowedKeys("limits"), diag_)) {
    marks[e.key] = e.value_mark;
    const std::string key = absl::StrCat("limits.", e.key);
    if (e.key == "max_batch_bytes") {
      if (auto size = ReadSize(e, key, diag_)) limits.max_batch_bytes = *size;
      continue;
    }
    if (e.key == "max_decode_pixels") {
      if (auto n = internal::ReadNumber(
              e, key, 1, pipeline::kMaxDecodePixelsCeiling,
              absl::StrCat("a whole number of pixels from 1 to ",
                           pipeline::kMaxDecodePixelsCeiling),
              diag_)) {
        if (*n != static_cast<double>(static_cast<uint64_t>(*n))) {
          diag_.Error(e.value_mark,
                      absl::StrCat(key, ": expected a whole number, got ", *n));
        } else {
          limits.max_decode_pixels = static_cast<uint64_t>(*n);
        }
      }
      continue;
    }
    if (e.key == "admission_wait") {
      if (auto s = internal::ReadNumber(e, key, 0, 86400,
                                        "a number of seconds from 0 to 86400",
                                        diag_)) {
        limits.admission_wait_seconds = *s;
      }
      continue;
    }
    const std::optional<uint32_t> count = ReadCount(e, key, diag_);
    if (!count) continue;
    if (e.key == "max_batch_size") limits.max_batch_size = *count;
    if (e.key == "max_prefetch") limits.max_prefetch = *count;
    if (e.key == "default_prefetch") limits.default_prefetch = *count;
    if (e.key == "max_streams") limits.max_streams = *count;
    if (e.key == "max_streams_per_peer") limits.max_streams_per_peer = *count;
  }
  if (diag_.error_count() != errors_before) return;

  // A bound below its default would make every default request fail. Point
  // at the key the user wrote (the lower one if they wrote both).
  const auto check = [&](absl::string_view low, uint32_t low_value,
                         absl::string_view high, uint32_t high_value) {
    if (low_value <= high_value) return;
    const auto it = marks.count(std::string(low)) != 0
                        ? marks.find(std::string(low))
                        : marks.find(std::string(high));
    diag_.Error(it == marks.end() ? entry.value_mark : it->second,
                absl::StrCat("limits.", low, " (", low_value,
                             ") is above limits.", high, " (", high_value,
                             "); expected at most ", high_value));
  };
  check("default_prefetch", limits.default_prefetch, "max_prefetch",
        limits.max_prefetch);
  check("max_streams_per_peer", limits.max_streams_per_peer, "max_streams",
        limits.max_streams);
}

void ConfigReader::ReadSharing(const MapEntry& entry) {
  if (!ExpectMap(entry, "sharing", "{lag_window: 8}", diag_)) return;
  for (const MapEntry& e :
       ReadMap(entry.value, "sharing", AllowedKeys("sharing"), diag_)) {
    if (e.key == "lag_window") {
      if (auto n = ReadCount(e, "sharing.lag_window", diag_)) {
        options_.sharing.lag_window = *n;
      }
    }
  }
}

void ConfigReader::ReadJobs(const MapEntry& entry) {
  if (!ExpectMap(entry, "jobs", "{sweep-1: {weight: 2}}", diag_)) return;
  for (const MapEntry& job : ReadMap(entry.value, "jobs", diag_)) {
    const std::string section = absl::StrCat("jobs.", job.key);
    if (!ExpectMap(job, section, "{weight: 2}", diag_)) continue;
    bool has_weight = false;
    for (const MapEntry& e :
         ReadMap(job.value, section, AllowedKeys("jobs.JOB"), diag_)) {
      if (e.key != "weight") continue;
      has_weight = true;
      if (auto w = internal::ReadNumber(
              e, absl::StrCat(section, ".weight"),
              pipeline::WorkerPool::kMinWeight,
              pipeline::WorkerPool::kMaxWeight,
              "a number from 0.001 to 1000000", diag_)) {
        options_.job_weights[job.key] = *w;
      }
    }
    if (!has_weight) {
      diag_.Error(job.value_mark,
                  absl::StrCat(section, " has no weight; expected {weight: 2}"));
    }
  }
}

void ConfigReader::ReadMetrics(const MapEntry& entry) {
  const YAML::Node& value = entry.value;
  if (value.IsScalar() &&
      internal::ParseBool(value.Scalar()) == std::optional<bool>(false)) {
    options_.metrics = MetricsOptions();
    return;
  }
  if (!value.IsMap()) {
    diag_.Error(entry.value_mark,
                absl::StrCat("metrics: expected off or a map like {listen: "
                             "127.0.0.1:9464}, got ",
                             Describe(value)));
    return;
  }
  bool has_listen = false;
  for (const MapEntry& e :
       ReadMap(value, "metrics", AllowedKeys("metrics"), diag_)) {
    if (e.key == "listen") {
      has_listen = true;
      if (auto address = ReadAddress(e, "metrics.listen", diag_)) {
        options_.metrics.enabled = true;
        options_.metrics.listen = *address;
      }
    }
  }
  if (!has_listen) {
    diag_.Error(entry.value_mark,
                "metrics has no listen; expected {listen: HOST:PORT}, or "
                "`metrics: off`");
  }
}

absl::StatusOr<ServerOptions> LoadFromText(std::string_view yaml,
                                           std::string source,
                                           fs::path base_dir,
                                           const LoadOptions& load) {
  Diagnostics diag(source);
  // yaml-cpp throws; this is its edge.
  try {
    const std::string text(yaml);
    const std::vector<YAML::Mark> documents = internal::FindDocuments(text);
    if (documents.size() > 1) {
      diag.Error(documents[1],
                 absl::StrCat("the config has ", documents.size(),
                              " YAML documents; expected one"));
      return diag.ToStatus();
    }
    ConfigReader reader(std::move(source), std::move(base_dir),
                        load.presets_dir);
    return reader.Read(documents.empty() ? YAML::Node() : YAML::Load(text));
  } catch (const YAML::Exception& e) {
    diag.Error(e.mark, absl::StrCat("invalid YAML: ", e.msg));
    return diag.ToStatus();
  }
}

}  // namespace

absl::StatusOr<ServerOptions> LoadConfigFile(const std::string& path,
                                             const LoadOptions& load) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot open config file '", path, "'"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, read);
  }
  if (std::ferror(file.get())) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read config file '", path, "'"));
  }
  return LoadConfigString(text, path, load);
}

absl::StatusOr<ServerOptions> LoadConfigString(std::string_view yaml,
                                               std::string_view source_name,
                                               const LoadOptions& load) {
  fs::path dir = fs::path(std::string(source_name)).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code error;
  fs::path absolute = fs::absolute(dir, error);
  if (error) absolute = dir;
  return LoadFromText(yaml, std::string(source_name), std::move(absolute),
                      load);
}

}  // namespace stoker::config
