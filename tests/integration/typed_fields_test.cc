// Typed fields end to end (docs/pipeline-design.md §4): a dataset of every
// pass-through kind (MakeTypedSamples) streamed through a daemon to the C++
// client, over grpc and shm, every value compared byte for byte with the
// record it came from; a corrupt record skipped (so FinishBatch compacts
// ragged tensors around it); ragged_limit's overflow policies; drop_fields.
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stoker/client.h"
#include "tests/testing/consume.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/test_server.h"

namespace stoker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kCaption;
using testing::kLabel;
using testing::kPatch;
using testing::kScore;
using testing::kTokens;
using testing::kWeight;

constexpr int kSamples = 40;
constexpr uint64_t kCorrupt = 7;  // 35 tokens' worth of bytes: not empty.

const char kPipelines[] =
    "  raw:\n"
    "    - drop_fields: []\n"
    "  nocap:\n"
    "    - drop_fields: [caption, patch]\n"
    "  truncate:\n"
    "    - ragged_limit: {field: tokens, max_length: 5, overflow: truncate}\n"
    "  skip:\n"
    "    - ragged_limit: {field: tokens, max_length: 5, overflow: skip}\n"
    "  fail:\n"
    "    - ragged_limit: {field: tokens, max_length: 5, overflow: fail}\n"
    "  typo:\n"
    "    - drop_fields: [captoin]\n";

class TypedFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(/*corrupt=*/false); }

  void Start(bool corrupt) {
    server_.reset();
    data_ = std::make_unique<testing::ScopedTempDir>();
    samples_ = testing::MakeTypedSamples(kSamples);
    dir_ = data_->path() + "/typed";
    ASSERT_TRUE(
        testing::WriteTypedDataset(dir_, samples_.schema, samples_.records)
            .ok());
    if (corrupt) {
      ASSERT_TRUE(testing::CorruptRecordOnDisk(dir_, kCorrupt).ok());
    }
    testing::TestServerOptions options;
    options.dataset_dir = dir_;
    options.on_corrupt = "skip";
    options.extra_yaml = kPipelines;
    auto server = testing::TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // Reads every batch of `pipeline` over `transport` and checks each
  // delivered sample against its record (tokens cut to `max_tokens`);
  // returns the stream's end status. Fills *ids and *skipped.
  absl::Status CheckStream(const std::string& pipeline,
                           const std::string& transport, size_t max_tokens,
                           std::vector<uint64_t>* ids,
                           std::vector<uint64_t>* skipped,
                           bool with_caption = true) {
    auto client = Client::Connect(server_->target());
    auto stream = client->OpenStream(
        testing::TestStream(pipeline, 8, /*seed=*/3, 1, transport));
    if (!stream.ok()) return stream.status();
    EXPECT_EQ((*stream)->info().transport, transport);
    Batch batch;
    absl::Status s;
    while ((s = (*stream)->Next(&batch)).ok()) {
      CheckBatch(batch, max_tokens, with_caption);
      ids->insert(ids->end(), batch.sample_ids().begin(),
                  batch.sample_ids().end());
      skipped->insert(skipped->end(), batch.skipped_ids().begin(),
                      batch.skipped_ids().end());
    }
    return s;
  }

  void CheckBatch(const Batch& batch, size_t max_tokens, bool with_caption) {
    const size_t n = batch.sample_ids().size();
    absl::StatusOr<RaggedView> tokens = batch.FindRagged("tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    EXPECT_EQ(tokens->values.dtype, DType::kInt32);
    EXPECT_FALSE(tokens->utf8);
    ASSERT_EQ(tokens->size(), n);
    const TensorView* label = batch.Find("label");
    const TensorView* score = batch.Find("score");
    const TensorView* weight = batch.Find("weight");
    ASSERT_NE(label, nullptr);
    ASSERT_NE(score, nullptr);
    ASSERT_NE(weight, nullptr);
    EXPECT_THAT(label->shape, ElementsAre(n));
    EXPECT_EQ(score->dtype, DType::kFloat32);
    EXPECT_EQ(weight->dtype, DType::kFloat64);
    const TensorView* patch = batch.Find("patch");
    absl::StatusOr<RaggedView> caption = batch.FindRagged("caption");
    if (with_caption) {
      ASSERT_NE(patch, nullptr);
      EXPECT_THAT(patch->shape, ElementsAre(n, 2, 3));
      ASSERT_TRUE(caption.ok()) << caption.status();
      EXPECT_TRUE(caption->utf8);
    } else {
      EXPECT_EQ(patch, nullptr);
      EXPECT_FALSE(caption.ok());
    }
    for (size_t k = 0; k < n; ++k) {
      const std::vector<std::string>& r =
          samples_.records[batch.sample_ids()[k]];
      const std::string_view want_tokens =
          std::string_view(r[kTokens]).substr(0, max_tokens * 4);
      EXPECT_EQ(tokens->bytes(k), want_tokens) << "sample " << k;
      EXPECT_EQ(std::string_view(
                    reinterpret_cast<const char*>(label->data) + 8 * k, 8),
                r[kLabel]);
      EXPECT_EQ(std::string_view(
                    reinterpret_cast<const char*>(score->data) + 4 * k, 4),
                r[kScore]);
      EXPECT_EQ(std::string_view(
                    reinterpret_cast<const char*>(weight->data) + 8 * k, 8),
                r[kWeight]);
      if (with_caption) {
        EXPECT_EQ(std::string_view(
                      reinterpret_cast<const char*>(patch->data) + 6 * k, 6),
                  r[kPatch]);
        EXPECT_EQ(caption->bytes(k), r[kCaption]);
      }
    }
  }

  std::unique_ptr<testing::ScopedTempDir> data_;
  std::string dir_;
  testing::TypedSamples samples_;
  std::unique_ptr<testing::TestServer> server_;
};

std::vector<uint64_t> AllIdsBut(const std::set<uint64_t>& left_out) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < kSamples; ++i) {
    if (left_out.count(i) == 0) ids.push_back(i);
  }
  return ids;
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST_F(TypedFieldsTest, EveryKindArrivesByteExactOverGrpcAndShm) {
  // The schema has empty token arrays (samples 0, 13, 26, 39) and one at
  // max_length (5, 18, 31: 12 tokens).
  ASSERT_EQ(samples_.schema[kTokens].max_length, 12u);
  for (const std::string transport : {"grpc", "shm"}) {
    SCOPED_TRACE(transport);
    std::vector<uint64_t> ids, skipped;
    EXPECT_TRUE(absl::IsOutOfRange(
        CheckStream("raw", transport, 1000, &ids, &skipped)));
    EXPECT_EQ(Sorted(ids), AllIdsBut({}));
    EXPECT_TRUE(skipped.empty());
  }
  // The two transports deliver the same bytes.
  const testing::Consumed grpc = testing::Consume(
      server_->target(), testing::TestStream("raw", 8, 3, 1, "grpc"));
  const testing::Consumed shm = testing::Consume(
      server_->target(), testing::TestStream("raw", 8, 3, 1, "shm"));
  EXPECT_EQ(grpc.batches, shm.batches);
  EXPECT_EQ(grpc.batches.size(), 5u);
}

TEST_F(TypedFieldsTest, ACorruptRecordIsSkippedAndTheRaggedBatchCompacted) {
  Start(/*corrupt=*/true);
  for (const std::string transport : {"grpc", "shm"}) {
    SCOPED_TRACE(transport);
    std::vector<uint64_t> ids, skipped;
    EXPECT_TRUE(absl::IsOutOfRange(
        CheckStream("raw", transport, 1000, &ids, &skipped)));
    EXPECT_EQ(Sorted(ids), AllIdsBut({kCorrupt}));
    EXPECT_THAT(skipped, ElementsAre(kCorrupt));
  }
}

TEST_F(TypedFieldsTest, RaggedLimitTruncatesSkipsOrFails) {
  std::vector<uint64_t> ids, skipped;
  EXPECT_TRUE(
      absl::IsOutOfRange(CheckStream("truncate", "grpc", 5, &ids, &skipped)));
  EXPECT_EQ(Sorted(ids), AllIdsBut({}));

  ids.clear();
  std::set<uint64_t> long_ones;
  for (uint64_t i = 0; i < kSamples; ++i) {
    if ((5 * i) % 13 > 5) long_ones.insert(i);
  }
  EXPECT_TRUE(
      absl::IsOutOfRange(CheckStream("skip", "shm", 5, &ids, &skipped)));
  EXPECT_EQ(Sorted(ids), AllIdsBut(long_ones));
  EXPECT_EQ(Sorted(skipped),
            std::vector<uint64_t>(long_ones.begin(), long_ones.end()));

  ids.clear();
  skipped.clear();
  const absl::Status s = CheckStream("fail", "grpc", 5, &ids, &skipped);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("over its ragged_limit max_length 5"));
}

TEST_F(TypedFieldsTest, DropFieldsLeavesFieldsOutAndRefusesUnknownOnes) {
  std::vector<uint64_t> ids, skipped;
  EXPECT_TRUE(
      absl::IsOutOfRange(CheckStream("nocap", "grpc", 1000, &ids, &skipped,
                                     /*with_caption=*/false)));
  EXPECT_EQ(Sorted(ids), AllIdsBut({}));

  const absl::Status s = CheckStream("typo", "grpc", 0, &ids, &skipped);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("dataset 'train'"));
  EXPECT_THAT(s.message(), HasSubstr("'drop_fields' (line "));
  EXPECT_THAT(s.message(), HasSubstr("field 'captoin' is not in the dataset"));
}

TEST_F(TypedFieldsTest, AnImagePipelineRefusesADatasetWithoutAnImage) {
  std::vector<uint64_t> ids, skipped;
  const absl::Status s = CheckStream("train", "grpc", 0, &ids, &skipped);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("needs an image field named 'image'"));
}

}  // namespace
}  // namespace stoker
