// The stager with stokerd's policy: the dataset is served from the moment
// its record indexes are local, its records read by range from the source
// and byte-identical to the local pack's, and each shard switches to its
// local file as the copy publishes it.
#include "server/staging/range_read_policy.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "server/staging/stager.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::staging {
namespace {

// Every field of record `id`, with their sizes.
std::string RecordBytes(const dataset::Dataset& ds, uint64_t id,
                        dataset::ReadInfo* info = nullptr) {
  absl::StatusOr<std::string> bytes = testing::RecordFieldBytes(ds, id, info);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

class RangeReadPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 12, 3, 3, 21);
    ASSERT_TRUE(dir.ok()) << dir.status();
    src_ = *dir;
    local_ = dataset::Dataset::Open("local", src_).value();
  }

  Stager::Options Base(std::shared_ptr<const dataset::Dataset>* served,
                       bool* staging_when_served) {
    Stager::Options o;
    o.name = "train";
    o.path = tmp_.path() + "/staged";
    o.source = src_;
    o.chunk_bytes = 4096;
    o.parallel = 1;  // Files in order: the indexes, then the shards.
    o.policy = std::make_unique<RangeReadPolicy>(
        storage::ParseLocation(src_).value(), storage::StoreOptions());
    o.on_servable = [=](std::shared_ptr<const dataset::Dataset> ds) {
      *served = ds;
      *staging_when_served = ds->staging();
      // Served before a shard is local: every record, from the source.
      if (!ds->staging()) return;
      for (uint64_t id = 0; id < ds->num_samples(); ++id) {
        dataset::ReadInfo info;
        EXPECT_EQ(RecordBytes(*ds, id, &info), RecordBytes(*local_, id));
        EXPECT_TRUE(info.from_source) << id;
      }
    };
    return o;
  }

  testing::ScopedTempDir tmp_;
  std::string src_;
  std::unique_ptr<dataset::Dataset> local_;
};

TEST_F(RangeReadPolicyTest, ServesFromTheIndexesThenSwitchesToLocalShards) {
  std::shared_ptr<const dataset::Dataset> served;
  bool staging_when_served = false;
  absl::StatusOr<std::unique_ptr<Stager>> stager =
      Stager::Create(Base(&served, &staging_when_served));
  ASSERT_TRUE(stager.ok()) << stager.status();
  (*stager)->Start();
  ASSERT_TRUE((*stager)->WaitDone(absl::Seconds(60)));
  EXPECT_EQ((*stager)->status().state, StageStatus::State::kComplete);
  ASSERT_NE(served, nullptr);
  EXPECT_TRUE(staging_when_served);
  EXPECT_EQ((*stager)->status().remote_records, 12u);
  // Every shard published: reads are local, the bytes the same.
  EXPECT_FALSE(served->staging());
  for (uint64_t id = 0; id < served->num_samples(); ++id) {
    dataset::ReadInfo info;
    EXPECT_EQ(RecordBytes(*served, id, &info), RecordBytes(*local_, id));
    EXPECT_FALSE(info.from_source) << id;
  }
  EXPECT_EQ(served->ContentDigest().value(), local_->ContentDigest().value());
}

TEST_F(RangeReadPolicyTest, APackWithoutRecordIndexesIsServedOnceCopied) {
  // The pack as one made before indexes: no index files, none named.
  dataset::Manifest m = local_->manifest();
  for (dataset::ShardInfo& s : m.shards) {
    std::filesystem::remove(src_ + "/" + s.index_file);
    s.index_file.clear();
    s.index_bytes = 0;
    s.index_digest.clear();
  }
  ASSERT_TRUE(dataset::WriteFileDurably(src_ + "/" + dataset::kManifestFile,
                                        dataset::SerializeManifest(m))
                  .ok());
  std::shared_ptr<const dataset::Dataset> served;
  bool staging_when_served = true;
  absl::StatusOr<std::unique_ptr<Stager>> stager =
      Stager::Create(Base(&served, &staging_when_served));
  ASSERT_TRUE(stager.ok()) << stager.status();
  (*stager)->Start();
  ASSERT_TRUE((*stager)->WaitDone(absl::Seconds(60)));
  ASSERT_NE(served, nullptr);
  EXPECT_FALSE(staging_when_served);  // Opened from the complete copy.
  EXPECT_EQ((*stager)->status().remote_records, 0u);
}

}  // namespace
}  // namespace stoker::staging
