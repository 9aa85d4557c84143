#include "server/config/config_reference.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/registry.h"

namespace stoker::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

TEST(AllowedKeysTest, ListsTheDirectChildrenOfASection) {
  EXPECT_THAT(AllowedKeys(""),
              ElementsAre("listen", "workers", "prefetch", "memory_budget",
                          "on_corrupt", "limits", "sharing", "jobs", "metrics",
                          "datasets",
                          "pipelines"));
  EXPECT_THAT(AllowedKeys("listen"),
              ElementsAre("unix", "tcp", "unix_mode", "unix_group", "tls",
                          "insecure_remote"));
  EXPECT_THAT(AllowedKeys("listen.tls"),
              ElementsAre("cert", "key", "client_ca"));
  EXPECT_THAT(
      AllowedKeys("limits"),
      ElementsAre("max_batch_size", "max_prefetch", "default_prefetch",
                  "max_streams", "max_streams_per_peer", "admission_wait",
                  "max_batch_bytes", "max_decode_pixels"));
  EXPECT_THAT(AllowedKeys("sharing"), ElementsAre("lag_window"));
  EXPECT_THAT(AllowedKeys("jobs.JOB"), ElementsAre("weight"));
  EXPECT_THAT(AllowedKeys("metrics"), ElementsAre("listen"));
  EXPECT_THAT(AllowedKeys("datasets.NAME"), ElementsAre("path"));
  EXPECT_THAT(AllowedKeys("nothing"), IsEmpty());
}

TEST(ConfigReferenceTest, HasARowForEveryKeyWithADefault) {
  const std::string reference = ConfigReference();
  for (const char* section :
       {"", "listen", "listen.tls", "limits", "sharing", "metrics"}) {
    for (const std::string& key : AllowedKeys(section)) {
      const std::string dotted =
          *section == '\0' ? key : absl::StrCat(section, ".", key);
      EXPECT_THAT(reference, HasSubstr(absl::StrCat("| `", dotted, "` | ")));
    }
  }
  // Every row of the key table has four non-empty cells.
  for (absl::string_view line : absl::StrSplit(reference, '\n')) {
    if (!absl::StartsWith(line, "| `")) continue;
    EXPECT_THAT(line, Not(HasSubstr("|  |"))) << line;
  }
}

TEST(ConfigReferenceTest, PrintsDefaultsFromServerOptions) {
  const std::string reference = ConfigReference();
  EXPECT_THAT(reference, HasSubstr("| `memory_budget` | size | 2GiB |"));
  EXPECT_THAT(reference, HasSubstr("| `workers` | `auto` or 1..1024 | auto |"));
  EXPECT_THAT(reference,
              HasSubstr("| `limits.max_batch_bytes` | size | 1GiB |"));
  EXPECT_THAT(reference,
              HasSubstr("| `listen.unix_mode` | octal string | \"0660\" |"));
  EXPECT_THAT(reference,
              HasSubstr("| `limits.max_batch_size` | integer >= 1 | 4096 |"));
}

TEST(ConfigReferenceTest, ListsEveryRegisteredOp) {
  const std::string reference = ConfigReference();
  const std::vector<std::string> names = pipeline::OpRegistry::Global().Names();
  ASSERT_THAT(names, Not(IsEmpty()));
  for (const std::string& name : names) {
    EXPECT_THAT(reference, HasSubstr(absl::StrCat("| `", name, "` | ")));
  }
}

}  // namespace
}  // namespace stoker::config
