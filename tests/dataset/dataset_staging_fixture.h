// The fixture of the tests of a dataset served while it is staged
// (dataset_staging_test.cc, dataset_staging_parts_test.cc): a pack in a
// folder, its source through the local Store, and the pack opened locally
// to compare with.
#ifndef STOKER_TESTS_DATASET_DATASET_STAGING_FIXTURE_H_
#define STOKER_TESTS_DATASET_DATASET_STAGING_FIXTURE_H_

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/dataset/dataset.h"
#include "server/dataset/range_source.h"
#include "server/storage/store_ranges.h"
#include "server/storage/url.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::dataset::staging_test {

namespace fs = std::filesystem;

// The pack's source: the folder `dir` through the local Store.
inline std::unique_ptr<RangeSource> FolderSource(const std::string& dir) {
  absl::StatusOr<storage::Location> location = storage::ParseLocation(dir);
  EXPECT_TRUE(location.ok()) << location.status();
  return storage::StoreRanges(storage::MakeLocalStore(*location));
}

// Holds every Read of a shard file (not of a record index) until Open():
// for a test that needs a fetch in flight.
class GatedSource : public RangeSource {
 public:
  explicit GatedSource(std::unique_ptr<RangeSource> inner)
      : inner_(std::move(inner)) {}
  std::string Url(const std::string& file) const override {
    return inner_->Url(file);
  }
  absl::StatusOr<std::string> Read(const std::string& file, uint64_t offset,
                                   uint64_t length) override {
    if (file.size() > 5 && file.substr(file.size() - 5) == ".lmdb") {
      absl::MutexLock lock(&mu_);
      ++waiting_;
      mu_.Await(absl::Condition(&open_));
      --waiting_;
    }
    return inner_->Read(file, offset, length);
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  int waiting() {
    absl::MutexLock lock(&mu_);
    return waiting_;
  }

 private:
  const std::unique_ptr<RangeSource> inner_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

// Every field of record `id`, concatenated with their sizes.
inline std::string RecordBytes(const Dataset& ds, uint64_t id,
                               ReadInfo* info = nullptr) {
  absl::StatusOr<std::string> bytes = testing::RecordFieldBytes(ds, id, info);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

class DatasetStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir =
        testing::MakeTestDataset(tmp_.path(), 24, 3, 3, 7);
    ASSERT_TRUE(dir.ok()) << dir.status();
    source_ = *dir;
    dest_ = tmp_.path() + "/dest";
    fs::create_directories(dest_);
    absl::StatusOr<std::unique_ptr<Dataset>> opened =
        Dataset::Open("local", source_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    local_ = *std::move(opened);
    manifest_ = local_->manifest();
  }

  std::unique_ptr<Dataset> OpenStaging(std::unique_ptr<RangeSource> source,
                                       RemoteOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::OpenStaging(
        "staged", dest_, manifest_, std::move(source), options);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? *std::move(ds) : nullptr;
  }

  // Copies shard `i`'s file into dest, as a pull publishes it.
  void CopyShard(size_t i) {
    fs::copy_file(source_ + "/" + manifest_.shards[i].file,
                  dest_ + "/" + manifest_.shards[i].file);
  }

  testing::ScopedTempDir tmp_;
  std::string source_, dest_;
  std::unique_ptr<Dataset> local_;
  Manifest manifest_;
};

}  // namespace stoker::dataset::staging_test

#endif  // STOKER_TESTS_DATASET_DATASET_STAGING_FIXTURE_H_
