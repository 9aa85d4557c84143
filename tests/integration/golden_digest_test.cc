// Golden digests: the exact bytes the test server's `train` and `val`
// pipelines deliver on the fixture dataset (MakeTestDataset: 50 JPEGs, 3
// classes, 2 shards, image seed 1) for stream seed 7, batch size 16, two
// epochs. Every refactor of the pipeline, the decoders, the batcher or the
// dataset layer must leave them unchanged; the design's steps
// (docs/pipeline-design.md §6, §7) each promise that.
//
// The digest is what `stoker stream --json` reports as content_digest:
// XXH3-64 of all tensor bytes of all batches, in order. A failure prints
// the digest now delivered. The constants were recorded before the typed
// fields (main at c09d1ff), and `stoker stream --json` of that build gives
// the same on the same dataset.
//
// When a change is MEANT to alter outputs (a bug fix in a resize, a new
// default), do not just paste the new value: first show the change is right
// (the reference tests beside the op, e.g. image_plan_test's full-decode
// reference and the parity harness, must still pass), then replace the
// constant below with the printed digest and say in the commit message which
// outputs changed and why. The constants also depend on libjpeg-turbo's
// encoder and decoder and on OpenCV's resize, so a different library version
// may change them; the CI image pins both (Debian 12: libjpeg-turbo 2.1.5,
// OpenCV 4.6).
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/dataset/manifest.h"
#include "tests/testing/consume.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

struct Golden {
  const char* pipeline;
  const char* digest;  // content_digest, as `stoker stream --json` prints it.
};

constexpr Golden kGolden[] = {
    {"train", "814df800bccbbf39"},
    {"val", "5c74c9c3f1796676"},
};

std::string Digest(const testing::Consumed& c) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const std::string& b : c.batches) {
    XXH3_64bits_update(state, b.data(), b.size());
  }
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return absl::StrFormat("%016x", hash);
}

// Streams both pipelines from a server on `dataset_dir` and compares them.
void ExpectGoldenDigests(const std::string& dataset_dir) {
  testing::TestServerOptions options;
  options.dataset_dir = dataset_dir;
  auto server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  for (const Golden& g : kGolden) {
    const testing::Consumed c = testing::Consume(
        (*server)->target(), testing::TestStream(g.pipeline, /*batch_size=*/16,
                                                 /*seed=*/7, /*epochs=*/2));
    ASSERT_TRUE(absl::IsOutOfRange(c.status)) << c.status;
    ASSERT_EQ(c.ids.size(), 100u);
    EXPECT_EQ(Digest(c), g.digest)
        << "pipeline '" << g.pipeline
        << "' delivers other bytes than it did; if that is meant, read the "
           "top of "
        << __FILE__;
  }
}

class GoldenDigestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As TestServer makes its dataset when it is given none.
    auto dir = testing::MakeTestDataset(tmp_.path(), 50, 3, 2, /*seed=*/1);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dataset_dir_ = *dir;
  }

  testing::ScopedTempDir tmp_;
  std::string dataset_dir_;
};

TEST_F(GoldenDigestTest, TrainAndValDeliverTheRecordedBytes) {
  ExpectGoldenDigests(dataset_dir_);
}

// A dataset packed before format version 2 has the same shards under a v1
// manifest (image as bytes with content_type image/jpeg); it must stream the
// same bytes.
TEST_F(GoldenDigestTest, AFormatVersion1ManifestDeliversTheSameBytes) {
  const std::string path = dataset_dir_ + "/" + dataset::kManifestFile;
  std::ifstream in(path);
  const nlohmann::json packed = nlohmann::json::parse(in);
  in.close();
  nlohmann::json v1 = {
      {"format_version", 1},
      {"name", packed.at("name")},
      {"num_samples", packed.at("num_samples")},
      {"fields",
       {{{"name", "image"}, {"kind", "bytes"}, {"content_type", "image/jpeg"}},
        {{"name", "label"}, {"kind", "int64"}, {"content_type", ""}}}},
      {"classes", packed.at("classes")},
      {"shards", packed.at("shards")}};
  std::ofstream(path, std::ios::trunc) << v1.dump(2);
  auto manifest = dataset::ReadManifest(dataset_dir_);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->format_version, 1);
  ExpectGoldenDigests(dataset_dir_);
}

}  // namespace
}  // namespace stoker
