#include "server/dataset/packer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "tests/testing/dataset_fixture.h"
#include "tests/testing/images.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A stand-in for the pipeline's image check: the start-of-image marker.
absl::StatusOr<std::string> CheckJpegMagic(std::string_view bytes) {
  if (bytes.substr(0, 3) == "\xff\xd8\xff") return "jpeg";
  return absl::InvalidArgumentError("not a JPEG");
}

// Names in `dir`, sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every record of the dataset in `dir`, in id order.
std::vector<std::string> Records(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open("d", dir);
  EXPECT_TRUE(ds.ok()) << ds.status();
  std::vector<std::string> out;
  for (uint64_t id = 0; ds.ok() && id < (*ds)->num_samples(); ++id) {
    EXPECT_TRUE((*ds)
                    ->Read(id,
                           [&](const RecordView& r) {
                             out.push_back(EncodeRecord(r.fields));
                             return absl::OkStatus();
                           })
                    .ok());
  }
  return out;
}

class PackerTest : public ::testing::Test {
 protected:
  // cat: 3 JPEGs; dog: 2 JPEGs, a PNG named .jpg, an empty file; plus a
  // hidden file.
  void SetUp() override {
    for (int i = 0; i < 3; ++i)
      Write("cat/" + std::to_string(i) + ".jpg", Jpeg(i));
    Write("dog/0.jpg", Jpeg(10));
    Write("dog/1.jpg", Jpeg(11));
    Write("dog/fake.jpg", testing::MakePngLookalike());
    Write("dog/empty.jpg", "");
    Write("dog/.DS_Store", "junk");
  }

  void Write(const std::string& rel, const std::string& bytes) {
    ASSERT_TRUE(testing::WriteTestFile(src() + "/" + rel, bytes).ok());
  }
  static std::string Jpeg(int seed) {
    return testing::MakeJpeg(40 + seed, 50, seed);
  }
  std::string src() const { return tmp_.path() + "/src"; }
  std::string dst() const { return tmp_.path() + "/out"; }

  PackOptions Options() const {
    PackOptions o;
    o.src = src();
    o.dst = dst();
    o.threads = 2;
    o.validate = CheckJpegMagic;
    return o;
  }

  testing::ScopedTempDir tmp_;
};

TEST_F(PackerTest, SkipsBadFilesAndReportsEachWithItsReason) {
  absl::StatusOr<PackReport> report = Pack(Options());
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->skipped.size(), 2u);
  EXPECT_EQ(report->skipped[0].path, src() + "/dog/empty.jpg");
  EXPECT_EQ(report->skipped[0].reason, "empty file");
  EXPECT_EQ(report->skipped[1].path, src() + "/dog/fake.jpg");
  EXPECT_EQ(report->skipped[1].reason, "not a JPEG");
  const Manifest& m = report->manifest;
  EXPECT_EQ(m.name, "out");
  EXPECT_EQ(m.num_samples, 5u);
  EXPECT_THAT(m.classes, ElementsAre("cat", "dog"));
  EXPECT_EQ(m.source, src());

  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open("out", dst());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<int64_t> labels;
  std::vector<std::string> images;
  for (uint64_t id = 0; id < 5; ++id) {
    ASSERT_TRUE((*ds)
                    ->Read(id,
                           [&](const RecordView& r) {
                             images.emplace_back(r.fields[0]);
                             labels.push_back(DecodeInt64(r.fields[1]));
                             return absl::OkStatus();
                           })
                    .ok());
  }
  EXPECT_THAT(labels, ElementsAre(0, 0, 0, 1, 1));
  EXPECT_EQ(images[0], Jpeg(0));
  EXPECT_EQ(images[4], Jpeg(11));
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("out", "src"));
  EXPECT_THAT(Entries(dst()), ElementsAre("manifest.json", "shard-00000.idx",
                                          "shard-00000.lmdb"));
}

TEST_F(PackerTest, WritesAnImageAndLabelSchemaWithFormatsAndMaxLength) {
  PackOptions o = Options();
  // The PNG lookalike passes as a "png", as the pipeline's check would name
  // a real one.
  o.validate = [](std::string_view bytes) -> absl::StatusOr<std::string> {
    if (bytes.substr(1, 3) == "PNG") return "png";
    return CheckJpegMagic(bytes);
  };
  absl::StatusOr<PackReport> report = Pack(o);
  ASSERT_TRUE(report.ok()) << report.status();
  absl::StatusOr<Manifest> m = ReadManifest(dst());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 2);
  ASSERT_EQ(m->fields.size(), 2u);
  const FieldSpec& image = m->fields[0];
  EXPECT_EQ(image.name, "image");
  EXPECT_EQ(image.kind->name(), "image");
  const uint64_t longest = std::max<uint64_t>(
      {Jpeg(0).size(), Jpeg(1).size(), Jpeg(2).size(), Jpeg(10).size(),
       Jpeg(11).size(), testing::MakePngLookalike().size()});
  EXPECT_EQ(image.max_length, longest);
  EXPECT_EQ(image.formats,
            (std::map<std::string, uint64_t>{{"jpeg", 5}, {"png", 1}}));
  EXPECT_EQ(m->fields[1].name, "label");
  EXPECT_EQ(m->fields[1].kind->name(), "int64");
  EXPECT_EQ(SerializeManifest(*m), SerializeManifest(report->manifest));
}

TEST_F(PackerTest, CountsNoFormatsWithoutAnImageCheck) {
  PackOptions o = Options();
  o.validate = nullptr;
  absl::StatusOr<PackReport> report = Pack(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->manifest.num_samples, 6u);  // Only the empty file left.
  EXPECT_TRUE(report->manifest.fields[0].formats.empty());
}

TEST_F(PackerTest, FailModeStopsAtABadFileAndLeavesNothingBehind) {
  PackOptions o = Options();
  o.on_error = OnError::kFail;
  const absl::Status s = Pack(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(src() + "/dog/"));
  EXPECT_THAT(s.message(), HasSubstr("(on_error is fail: pack stopped)"));
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("src"));
}

TEST_F(PackerTest, OutputDoesNotDependOnTheThreadCount) {
  PackOptions one = Options();
  one.threads = 1;
  one.shards = 3;
  PackOptions many = Options();
  many.threads = 4;
  many.shards = 3;
  many.dst = tmp_.path() + "/out4";
  absl::StatusOr<PackReport> a = Pack(one);
  absl::StatusOr<PackReport> b = Pack(many);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->manifest.shards.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a->manifest.shards[i].first_id, b->manifest.shards[i].first_id);
    EXPECT_EQ(a->manifest.shards[i].num_samples,
              b->manifest.shards[i].num_samples);
  }
  EXPECT_EQ(Records(one.dst), Records(many.dst));
  EXPECT_EQ(Records(one.dst).size(), 5u);
}

TEST_F(PackerTest, ShardsHoldContiguousIdsAndNeverOutnumberSamples) {
  PackOptions o = Options();
  o.shards = 10;
  absl::StatusOr<PackReport> report = Pack(o);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->manifest.shards.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(report->manifest.shards[i].first_id, i);
    EXPECT_EQ(report->manifest.shards[i].num_samples, 1u);
  }
}

TEST_F(PackerTest, PacksAListFileInItsOrderWithoutClasses) {
  Write("list.txt", "dog/1.jpg,7\ncat/0.jpg,3\n");
  PackOptions o = Options();
  o.src.clear();
  o.list_file = src() + "/list.txt";
  o.name = "listed";
  absl::StatusOr<PackReport> report = Pack(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->manifest.name, "listed");
  EXPECT_TRUE(report->manifest.classes.empty());
  const std::vector<std::string> records = Records(dst());
  EXPECT_THAT(records, ElementsAre(EncodeRecord({Jpeg(11), EncodeInt64(7)}),
                                   EncodeRecord({Jpeg(0), EncodeInt64(3)})));
}

TEST_F(PackerTest, ABadListLineIsAnErrorNamingFileAndLine) {
  Write("list.txt", "dog/1.jpg,7\ncat/0.jpg\n");
  PackOptions o = Options();
  o.src.clear();
  o.list_file = src() + "/list.txt";
  EXPECT_EQ(Pack(o).status().ToString(),
            "INVALID_ARGUMENT: " + src() +
                "/list.txt:2: expected 'path,label', got 'cat/0.jpg'");
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("src"));
}

TEST_F(PackerTest, AnExistingDestinationNeedsForceAndMustBeADataset) {
  ASSERT_TRUE(Pack(Options()).ok());
  EXPECT_EQ(Pack(Options()).status().code(), absl::StatusCode::kAlreadyExists);
  PackOptions o = Options();
  o.force = true;
  o.shards = 2;
  absl::StatusOr<PackReport> replaced = Pack(o);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_THAT(Entries(dst()),
              ElementsAre("manifest.json", "shard-00000.idx",
                          "shard-00000.lmdb", "shard-00001.idx",
                          "shard-00001.lmdb"));
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("out", "src"));
  o.dst = src();  // A folder that is not a dataset is never replaced.
  EXPECT_EQ(Pack(o).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(src() + "/cat/0.jpg"));
}

TEST_F(PackerTest, RefusesADestinationInsideTheSource) {
  PackOptions o = Options();
  o.dst = src() + "/packed";
  EXPECT_EQ(Pack(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.dst = src() + "-packed";  // A sibling whose name starts alike is fine.
  EXPECT_TRUE(Pack(o).ok());
}

TEST_F(PackerTest, NothingLeftToPackIsAnError) {
  PackOptions o = Options();
  o.validate = [](std::string_view) -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError("no");
  };
  const absl::Status s = Pack(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nothing to pack: all 7 samples"));
  // Each reason is in the error, counted, with examples: no report of
  // skipped files follows.
  EXPECT_THAT(s.message(), HasSubstr("were skipped, for these reasons:\n"));
  EXPECT_THAT(s.message(),
              HasSubstr("  6 x no: " + src() + "/cat/0.jpg, " + src() +
                        "/cat/1.jpg, " + src() + "/cat/2.jpg, ... and 3 more"));
  EXPECT_THAT(s.message(), HasSubstr("  1 x "));
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("src"));
}

TEST_F(PackerTest, AMissingParentFolderIsNamed) {
  PackOptions o = Options();
  o.dst = tmp_.path() + "/no/such/out";
  const absl::Status s = Pack(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cannot pack into " + o.dst + ": its parent folder " +
                             tmp_.path() + "/no/such does not exist; create "
                             "it first (mkdir -p " + tmp_.path() +
                             "/no/such)");
  EXPECT_THAT(Entries(tmp_.path()), ElementsAre("src"));
}

TEST_F(PackerTest, ReportsProgressOfBothPasses) {
  PackOptions o = Options();
  std::vector<std::string> phases;
  PackProgress last;
  o.progress = [&](const PackProgress& p) {
    if (phases.empty() || phases.back() != p.phase)
      phases.emplace_back(p.phase);
    last = p;
  };
  ASSERT_TRUE(Pack(o).ok());
  EXPECT_THAT(phases, ElementsAre("scan", "write"));
  EXPECT_EQ(last.done, 5u);
  EXPECT_EQ(last.total, 5u);
  EXPECT_GT(last.bytes, 0u);
}

}  // namespace
}  // namespace stoker::dataset
