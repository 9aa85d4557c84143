// Fuzzes the config loader (server/config/config_loader.h): the text of a
// stokerd YAML config, through yaml-cpp, the key checks, the op registry and
// Pipeline::Create.
//
// What must hold: LoadConfigString never crashes and lets no yaml-cpp
// exception out; every refusal is InvalidArgument and names the file; an
// accepted config has a listener and sane limits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/config/config_loader.h"

namespace {

// Relative dataset paths resolve against this file's folder, which does not
// exist: the fuzzer never points the loader at the working directory.
constexpr std::string_view kSource = "/nonexistent-stoker-fuzz/stoker.yaml";

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_config: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<stoker::config::ServerOptions> options =
      stoker::config::LoadConfigString(yaml, kSource);
  if (!options.ok()) {
    Check(absl::IsInvalidArgument(options.status()),
          "a bad config is not InvalidArgument");
    Check(std::string(options.status().message()).find(kSource) !=
              std::string::npos,
          "the error does not name the config file");
    return 0;
  }
  Check(!options->listen.unix_path.empty() || !options->listen.tcp.empty(),
        "an accepted config has no listener");
  Check(options->limits.max_batch_size >= 1 && options->limits.max_prefetch >= 1,
        "an accepted config has a zero limit");
  Check(options->limits.default_prefetch <= options->limits.max_prefetch,
        "default_prefetch is over max_prefetch");
  Check(!options->datasets.empty() && !options->pipelines.empty(),
        "an accepted config has no dataset or no pipeline");
  return 0;
}
