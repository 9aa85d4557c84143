#include "server/dataset/shard_index.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/file_util.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/record.h"
#include "server/dataset/verifier.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset {
namespace {

using ::testing::HasSubstr;

// The value LMDB holds for `id` in the shard file `path`.
std::string LmdbValue(const std::string& path, uint64_t bytes, uint64_t id) {
  absl::StatusOr<ReadOnlyShard> shard = OpenShardForRead(path, bytes);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return "";
  MDB_txn* txn = nullptr;
  EXPECT_EQ(mdb_txn_begin(shard->env.get(), nullptr, MDB_RDONLY, &txn), 0);
  const TxnPtr owned(txn);
  const std::string key = EncodeKey(id);
  MDB_val k = ToVal(key), v;
  EXPECT_EQ(mdb_get(txn, shard->dbi, &k, &v), 0);
  return std::string(ToView(v));
}

// Checks that every range of the index of `shard` reads, from the file's
// bytes, exactly the value LMDB returns for its id; returns the largest.
uint64_t ExpectRangesReadTheRecords(const std::string& dir,
                                    const ShardInfo& shard) {
  std::string file, index_bytes;
  EXPECT_TRUE(ReadFileToString(dir + "/" + shard.file, &file).ok());
  EXPECT_TRUE(
      ReadFileToString(dir + "/" + shard.index_file, &index_bytes).ok());
  EXPECT_EQ(index_bytes.size(), shard.index_bytes);
  EXPECT_EQ(BytesDigest(index_bytes), shard.index_digest);
  absl::StatusOr<ShardIndex> index = ParseShardIndex(index_bytes, "idx");
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return 0;
  EXPECT_EQ(index->first_id, shard.first_id);
  EXPECT_EQ(index->records.size(), shard.num_samples);
  uint64_t largest = 0;
  for (uint64_t i = 0; i < index->records.size(); ++i) {
    const RecordRange& r = index->records[i];
    EXPECT_LE(r.offset + r.length, file.size());
    const std::string ranged = file.substr(r.offset, r.length);
    EXPECT_EQ(ranged, LmdbValue(dir + "/" + shard.file, shard.bytes,
                                shard.first_id + i))
        << "id " << shard.first_id + i;
    EXPECT_TRUE(DecodeRecord(ranged).ok()) << "id " << shard.first_id + i;
    largest = std::max(largest, r.length);
  }
  return largest;
}

TEST(ShardIndexTest, PackRecordsEachShardsDigestAndARecordIndex) {
  testing::ScopedTempDir tmp;
  absl::StatusOr<std::string> dir =
      testing::MakeTestDataset(tmp.path(), 12, 3, 3, 7);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<Manifest> m = ReadManifest(*dir);
  ASSERT_TRUE(m.ok()) << m.status();
  uint64_t largest = 0;
  for (const ShardInfo& shard : m->shards) {
    EXPECT_EQ(FileDigest(*dir + "/" + shard.file).value(), shard.digest);
    EXPECT_EQ(shard.index_file, IndexFileName(shard.file));
    largest = std::max(largest, ExpectRangesReadTheRecords(*dir, shard));
  }
  // JPEGs of a few KiB: LMDB stores such values on overflow pages.
  EXPECT_GT(largest, 4096u);
}

TEST(ShardIndexTest, RangesOfSmallValuesInSharedLeafPagesReadTheRecords) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/typed";
  const testing::TypedSamples samples = testing::MakeTypedSamples(40);
  ASSERT_TRUE(
      testing::WriteTypedDataset(dir, samples.schema, samples.records).ok());
  absl::StatusOr<Manifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  ShardInfo shard = m->shards[0];
  ASSERT_TRUE(WriteShardIndexAndDigests(dir, &shard).ok());
  EXPECT_LT(ExpectRangesReadTheRecords(dir, shard), 512u);
}

TEST(ShardIndexTest, ParseRefusesADamagedIndex) {
  ShardIndex index;
  index.first_id = 5;
  index.records = {{4096, 100}, {8192, 5000}};
  std::string bytes = SerializeShardIndex(index);
  absl::StatusOr<ShardIndex> back = ParseShardIndex(bytes, "a.idx");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->first_id, 5u);
  EXPECT_EQ(back->records[1].offset, 8192u);
  EXPECT_EQ(back->records[1].length, 5000u);

  bytes[30] ^= 1;
  EXPECT_EQ(ParseShardIndex(bytes, "a.idx").status().ToString(),
            "DATA_LOSS: record index a.idx: checksum mismatch");
  EXPECT_THAT(ParseShardIndex(bytes.substr(0, 40), "a.idx").status().message(),
              HasSubstr("records need"));
  EXPECT_THAT(ParseShardIndex("nonsense", "a.idx").status().message(),
              HasSubstr("not a record index"));
}

TEST(ShardIndexTest, DigestsAreXxh3Of128BitsInHex) {
  // XXH3-128 of the empty input, high half first.
  EXPECT_EQ(BytesDigest(""), "xxh3-128:99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(IndexFileName("shard-00003.lmdb"), "shard-00003.idx");
}

TEST(ShardIndexTest, VerifyReportsAShardOrIndexWhoseDigestDiffers) {
  testing::ScopedTempDir tmp;
  absl::StatusOr<std::string> dir =
      testing::MakeTestDataset(tmp.path(), 6, 2, 2, 3);
  ASSERT_TRUE(dir.ok()) << dir.status();
  // The last byte of the index: its checksum.
  {
    std::string bytes;
    ASSERT_TRUE(ReadFileToString(*dir + "/shard-00001.idx", &bytes).ok());
    bytes[bytes.size() - 1] ^= 1;
    ASSERT_TRUE(testing::WriteTestFile(*dir + "/shard-00001.idx", bytes).ok());
  }
  ASSERT_TRUE(testing::CorruptRecordOnDisk(*dir, 1).ok());
  absl::StatusOr<VerifyReport> report = Verify(*dir, nullptr, nullptr);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->errors.size(), 3u)
      << ::testing::PrintToString(report->errors);
  EXPECT_THAT(report->errors[0],
              HasSubstr("shard-00000.lmdb: digest is xxh3-128:"));
  EXPECT_THAT(report->errors[0], HasSubstr(", the manifest says xxh3-128:"));
  EXPECT_EQ(report->errors[1], "shard-00000.lmdb, key 1: checksum mismatch");
  EXPECT_THAT(report->errors[2], HasSubstr("shard-00001.idx: digest is"));
}

}  // namespace
}  // namespace stoker::dataset
