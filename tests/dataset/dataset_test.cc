#include "server/dataset/dataset.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 12, 3, 2, 7);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }

  std::unique_ptr<Dataset> OpenOrDie() {
    absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open("test", dir_);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? *std::move(ds) : nullptr;
  }

  // Reads record `id` and returns its status.
  static absl::Status Touch(const Dataset& ds, uint64_t id) {
    return ds.Read(id, [](const RecordView&) { return absl::OkStatus(); });
  }

  testing::ScopedTempDir tmp_;
  std::string dir_;
};

TEST_F(DatasetTest, ReadsEveryRecordWithItsImageAndLabel) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->num_samples(), 12u);
  EXPECT_EQ(ds->name(), "test");
  EXPECT_EQ(ds->FieldIndex("image"), 0);
  EXPECT_EQ(ds->FieldIndex("label"), 1);
  EXPECT_EQ(ds->FieldIndex("caption"), -1);
  std::map<int64_t, int> per_label;
  int64_t last_label = 0;
  for (uint64_t id = 0; id < ds->num_samples(); ++id) {
    ASSERT_TRUE(ds->Read(id, [&](const RecordView& r) {
                    EXPECT_EQ(r.fields[0].substr(0, 2), "\xff\xd8");
                    const int64_t label = DecodeInt64(r.fields[1]);
                    EXPECT_GE(label, last_label);  // ImageFolder order.
                    last_label = label;
                    ++per_label[label];
                    return absl::OkStatus();
                  }).ok());
  }
  EXPECT_EQ(per_label, (std::map<int64_t, int>{{0, 4}, {1, 4}, {2, 4}}));
}

TEST_F(DatasetTest, ReturnsNotFoundForAnIdOutOfRange) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(Touch(*ds, 12).ToString(),
            "NOT_FOUND: dataset 'test': sample id 12 out of range [0, 12)");
}

TEST_F(DatasetTest, ReturnsTheCallbacksStatusNamingShardAndKey) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  const absl::Status s = ds->Read(
      0, [](const RecordView&) { return absl::CancelledError("stop"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(s.message()),
              ::testing::MatchesRegex("dataset '[^']+': shard shard-[0-9]+"
                                      "\\.lmdb, key 0: stop"));
}

// Every read checks each value by its field's kind (sizes only; a str's
// UTF-8 is pack's and verify's to check), naming the dataset, shard and key.
TEST(TypedDatasetTest, ReadChecksEachValueByItsKindNamingShardAndKey) {
  testing::ScopedTempDir tmp;
  const std::vector<FieldSpec> schema = {
      MakeArraySpec("tokens", tensor::DType::kInt32, {-1}).value(),
      MakeFieldSpec("weight", "float32").value(),
      MakeFieldSpec("caption", "str").value()};
  const std::string ok_tokens(12, '\1');
  ASSERT_TRUE(testing::WriteTypedDataset(tmp.path() + "/d", schema,
                                         {{ok_tokens, "abcd", "caf\xc3\xa9"},
                                          {"", "abcd", "caf\xe9"},
                                          {std::string(6, '\0'), "abcd", ""},
                                          {ok_tokens, "abc", ""}})
                  .ok());
  absl::StatusOr<std::unique_ptr<Dataset>> ds =
      Dataset::Open("typed", tmp.path() + "/d");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().fields[0].kind->name(), "ndarray");
  std::vector<std::string> seen;
  const auto read = [&](uint64_t id) {
    return (*ds)->Read(id, [&](const RecordView& r) {
      seen.emplace_back(r.fields[2]);
      return absl::OkStatus();
    });
  };
  EXPECT_TRUE(read(0).ok());
  EXPECT_TRUE(read(1).ok());  // No tokens; a caption pack would refuse.
  EXPECT_EQ(read(2).ToString(),
            "DATA_LOSS: dataset 'typed': shard shard-00000.lmdb, key 2: field "
            "'tokens': 6 bytes is not whole rows of 4 bytes (int32 [-1])");
  EXPECT_EQ(read(3).ToString(),
            "DATA_LOSS: dataset 'typed': shard shard-00000.lmdb, key 3: field "
            "'weight' has 3 bytes, float32 needs 4");
  EXPECT_EQ(seen, (std::vector<std::string>{"caf\xc3\xa9", "caf\xe9"}));
}

TEST_F(DatasetTest, ReturnsDataLossNamingShardAndKeyAfterAByteFlipOnDisk) {
  ASSERT_TRUE(testing::CorruptRecordOnDisk(dir_, 8).ok());
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(Touch(*ds, 8).ToString(),
            "DATA_LOSS: dataset 'test': shard shard-00001.lmdb, key 8: "
            "checksum mismatch");
  for (uint64_t id = 0; id < 12; ++id) {
    if (id != 8) {
      EXPECT_TRUE(Touch(*ds, id).ok()) << "id " << id;
    }
  }
}

TEST_F(DatasetTest, ServesConcurrentReaders) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (uint64_t id = 0; id < 12; ++id) {
          EXPECT_TRUE(Touch(*ds, id).ok());
        }
      }
    });
  }
  for (std::thread& t : readers) t.join();
}

TEST_F(DatasetTest, LeavesNoLockFilesAndChangesNothing) {
  const auto before = fs::last_write_time(dir_ + "/shard-00000.lmdb");
  {
    std::unique_ptr<Dataset> ds = OpenOrDie();
    ASSERT_NE(ds, nullptr);
    ASSERT_TRUE(Touch(*ds, 0).ok());
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "manifest.json", "shard-00000.idx", "shard-00000.lmdb",
                         "shard-00001.idx", "shard-00001.lmdb"));
  EXPECT_EQ(fs::last_write_time(dir_ + "/shard-00000.lmdb"), before);
}

TEST_F(DatasetTest, OpenReturnsNotFoundForAFolderWithoutManifest) {
  const absl::Status s = Dataset::Open("x", tmp_.path() + "/nothing").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("dataset 'x': manifest "));
}

TEST_F(DatasetTest, OpenReturnsDataLossForATruncatedShard) {
  const std::string shard = dir_ + "/shard-00001.lmdb";
  const uintmax_t size = fs::file_size(shard);
  fs::resize_file(shard, size - 4096);
  const absl::Status s = Dataset::Open("test", dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("shard-00001.lmdb has ", size - 4096,
                                     " bytes, the manifest says ", size)));
}

TEST_F(DatasetTest, ShardTruncatedWhileOpenIsDataLossAndMarksItDamaged) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  EXPECT_TRUE(ds->healthy());
  // Shard 1 holds ids 6..11. Keep only its meta pages: any lookup faults.
  const std::string shard = dir_ + "/shard-00001.lmdb";
  fs::resize_file(shard, 2 * 4096);
  const absl::Status s = Touch(*ds, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("dataset 'test': shard shard-00001.lmdb, key 9: "
                        "SIGBUS reading offset "));
  EXPECT_THAT(s.message(), HasSubstr("it has 8192 bytes now"));
  EXPECT_TRUE(IsShardDamage(s));
  EXPECT_FALSE(ds->healthy());
  ASSERT_EQ(ds->Damage().size(), 1u);
  EXPECT_EQ(ds->Damage()[0].file, "shard-00001.lmdb");
  EXPECT_THAT(ds->Damage()[0].reason, HasSubstr("key 9: SIGBUS"));
  // Later reads of the shard do not touch the map again.
  const absl::Status later = Touch(*ds, 6);
  EXPECT_TRUE(IsShardDamage(later));
  EXPECT_THAT(later.message(), HasSubstr("the shard was found damaged (key 9"));
  // The other shard reads on.
  for (uint64_t id = 0; id < 6; ++id) {
    EXPECT_TRUE(Touch(*ds, id).ok()) << "id " << id;
  }
}

TEST_F(DatasetTest, ABadRecordIsNotShardDamage) {
  ASSERT_TRUE(testing::CorruptRecordOnDisk(dir_, 8).ok());
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  EXPECT_FALSE(IsShardDamage(Touch(*ds, 8)));
  EXPECT_TRUE(ds->healthy());
}

TEST_F(DatasetTest, ReadsTheRecordFromACopyNotFromTheMap) {
  std::unique_ptr<Dataset> ds = OpenOrDie();
  ASSERT_NE(ds, nullptr);
  const std::string shard = dir_ + "/shard-00000.lmdb";
  const std::string before = [&] {
    std::string s;
    EXPECT_TRUE(ReadFileToString(shard, &s).ok());
    return s;
  }();
  ASSERT_TRUE(ds->Read(0, [&](const RecordView& r) {
                  // The field's bytes are not inside the file's map.
                  const char* p = r.fields[0].data();
                  EXPECT_EQ(before.find(std::string(r.fields[0])) !=
                                std::string::npos,
                            true);
                  fs::resize_file(shard, 2 * 4096);  // Must not matter now.
                  EXPECT_EQ(p[r.fields[0].size() - 1], r.fields[0].back());
                  EXPECT_EQ(r.fields[0].substr(0, 2), "\xff\xd8");
                  return absl::OkStatus();
                }).ok());
}

TEST_F(DatasetTest, OpenReturnsDataLossForAMissingShard) {
  fs::remove(dir_ + "/shard-00000.lmdb");
  const absl::Status s = Dataset::Open("test", dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("shard-00000.lmdb: No such file"));
}

}  // namespace
}  // namespace stoker::dataset
