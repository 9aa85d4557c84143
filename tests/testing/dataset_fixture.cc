#include "tests/testing/dataset_fixture.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/dataset.h"
#include "server/dataset/file_util.h"
#include "server/dataset/packer.h"
#include "tests/testing/images.h"

namespace stoker::testing {

namespace fs = std::filesystem;

ScopedTempDir::ScopedTempDir() {
  const char* base = getenv("TMPDIR");
  std::string templ = absl::StrCat(
      base != nullptr && *base != '\0' ? base : "/tmp", "/stoker-test-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    throw std::runtime_error(absl::StrCat("mkdtemp ", templ, " failed"));
  }
  path_ = templ;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

absl::Status WriteTestFile(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeTestDataset(const std::string& parent_dir,
                                            int num_samples, int num_classes,
                                            int shards, uint32_t seed) {
  const std::string src = absl::StrCat(parent_dir, "/images-", seed);
  for (int i = 0; i < num_samples; ++i) {
    const uint32_t h = TestHash(seed * 100003u + i);
    const int width = 40 + h % 81;
    const int height = 40 + (h >> 8) % 81;
    const std::string path =
        absl::StrFormat("%s/class_%02d/img_%05d.jpg", src, i % num_classes, i);
    if (absl::Status s =
            WriteTestFile(path, MakeJpeg(width, height, seed * 100003u + i));
        !s.ok()) {
      return s;
    }
  }
  dataset::PackOptions options;
  options.src = src;
  options.dst = absl::StrCat(parent_dir, "/dataset-", seed);
  options.name = "test";
  options.shards = shards;
  options.threads = 2;
  options.on_error = dataset::OnError::kFail;
  absl::StatusOr<dataset::PackReport> report = dataset::Pack(options);
  if (!report.ok()) return report.status();
  return options.dst;
}

absl::Status CorruptRecordOnDisk(const std::string& dataset_dir, uint64_t id) {
  absl::StatusOr<std::unique_ptr<dataset::Dataset>> ds =
      dataset::Dataset::Open("corrupt", dataset_dir);
  if (!ds.ok()) return ds.status();
  std::string field;
  if (absl::Status s = (*ds)->Read(id,
                                   [&](const dataset::RecordView& r) {
                                     field = std::string(r.fields[0]);
                                     return absl::OkStatus();
                                   });
      !s.ok()) {
    return s;
  }
  const auto& shards = (*ds)->manifest().shards;
  const auto shard = std::find_if(
      shards.rbegin(), shards.rend(),
      [&](const dataset::ShardInfo& info) { return info.first_id <= id; });
  const std::string path = absl::StrCat(dataset_dir, "/", shard->file);
  ds->reset();
  std::string bytes;
  if (absl::Status s = dataset::ReadFileToString(path, &bytes); !s.ok()) {
    return s;
  }
  const size_t pos = bytes.find(field);
  if (field.size() < 2 || pos == std::string::npos ||
      bytes.find(field, pos + 1) != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "record ", id, " is not stored exactly once, contiguously, in ", path));
  }
  bytes[pos + field.size() / 2] ^= 0x5a;
  return WriteTestFile(path, bytes);
}

}  // namespace stoker::testing
