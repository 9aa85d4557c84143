// Fuzzes the manifest reader (server/dataset/manifest.h): the text of a
// dataset's manifest.json.
//
// What must hold: ParseManifest never crashes or throws, every refusal is
// InvalidArgument naming the file, and an accepted manifest serializes to
// JSON that parses back to the same manifest.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/dataset/manifest.h"

namespace {

constexpr std::string_view kPath = "/fuzz/dataset/manifest.json";

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_manifest: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<stoker::dataset::Manifest> m =
      stoker::dataset::ParseManifest(json, kPath);
  if (!m.ok()) {
    Check(absl::IsInvalidArgument(m.status()),
          "a bad manifest is not InvalidArgument");
    Check(std::string(m.status().message()).find(kPath) != std::string::npos,
          "the error does not name the manifest file");
    return 0;
  }
  const std::string text = stoker::dataset::SerializeManifest(*m);
  absl::StatusOr<stoker::dataset::Manifest> again =
      stoker::dataset::ParseManifest(text, kPath);
  Check(again.ok(), "a serialized manifest does not parse");
  Check(stoker::dataset::SerializeManifest(*again) == text,
        "a manifest does not round-trip");
  return 0;
}
