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
#include "server/dataset/lmdb_util.h"
#include "server/dataset/manifest.h"
#include "server/dataset/packer.h"
#include "server/dataset/record.h"
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

absl::Status WriteTypedDataset(
    const std::string& dir, const std::vector<dataset::FieldSpec>& schema,
    const std::vector<std::vector<std::string>>& records) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir));
  const std::string file = "shard-00000.lmdb";
  const std::string path = absl::StrCat(dir, "/", file);
  size_t bytes = 0;
  for (const auto& r : records) {
    for (const std::string& v : r) bytes += v.size() + 4096;
  }
  {
    absl::StatusOr<dataset::EnvPtr> env =
        dataset::CreateShardForWrite(path, ((2 * bytes >> 20) + 2) << 20);
    if (!env.ok()) return env.status();
    MDB_txn* txn = nullptr;
    MDB_dbi dbi = 0;
    if (int rc = mdb_txn_begin(env->get(), nullptr, 0, &txn); rc != 0) {
      return dataset::LmdbError(rc, path);
    }
    dataset::TxnPtr owned(txn);
    if (int rc = mdb_dbi_open(txn, nullptr, MDB_CREATE, &dbi); rc != 0) {
      return dataset::LmdbError(rc, path);
    }
    for (size_t i = 0; i < records.size(); ++i) {
      const std::vector<std::string_view> fields(records[i].begin(),
                                                 records[i].end());
      const std::string key = dataset::EncodeKey(i);
      const std::string value = dataset::EncodeRecord(fields);
      MDB_val k = dataset::ToVal(key), v = dataset::ToVal(value);
      if (int rc = mdb_put(txn, dbi, &k, &v, MDB_APPEND); rc != 0) {
        return dataset::LmdbError(rc, path);
      }
    }
    if (int rc = mdb_txn_commit(owned.release()); rc != 0) {
      return dataset::LmdbError(rc, path);
    }
  }
  dataset::Manifest m;
  m.name = "typed";
  m.num_samples = records.size();
  m.fields = schema;
  m.shards = {{file, 0, records.size(), fs::file_size(path, ec)}};
  if (ec) return absl::InternalError(absl::StrCat("cannot stat ", path));
  return WriteTestFile(absl::StrCat(dir, "/", dataset::kManifestFile),
                       dataset::SerializeManifest(m));
}

namespace {

template <typename T>
std::string LittleEndian(const std::vector<T>& values) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

dataset::FieldSpec Must(absl::StatusOr<dataset::FieldSpec> spec) {
  if (!spec.ok())
    throw std::runtime_error(std::string(spec.status().message()));
  return *std::move(spec);
}

}  // namespace

TypedSamples MakeTypedSamples(int num_samples) {
  using tensor::DType;
  TypedSamples out;
  out.schema = {Must(dataset::MakeArraySpec("tokens", DType::kInt32, {-1})),
                Must(dataset::MakeFieldSpec("label", "int64")),
                Must(dataset::MakeFieldSpec("score", "float32")),
                Must(dataset::MakeFieldSpec("weight", "float64")),
                Must(dataset::MakeArraySpec("patch", DType::kUint8, {2, 3})),
                Must(dataset::MakeFieldSpec("caption", "str"))};
  uint64_t longest_tokens = 0, longest_caption = 0;
  for (int i = 0; i < num_samples; ++i) {
    std::vector<int32_t> tokens((5 * i) % 13);
    for (size_t j = 0; j < tokens.size(); ++j) {
      tokens[j] = static_cast<int32_t>(1000 * i + j);
    }
    std::vector<uint8_t> patch(6);
    for (size_t j = 0; j < patch.size(); ++j) patch[j] = uint8_t(i + j);
    const std::string caption =
        absl::StrCat("caption \xc3\xa9", std::string(i % 7, 'a' + i % 26));
    longest_tokens = std::max<uint64_t>(longest_tokens, tokens.size());
    longest_caption = std::max<uint64_t>(longest_caption, caption.size());
    out.records.push_back({LittleEndian(tokens),
                           LittleEndian(std::vector<int64_t>{i}),
                           LittleEndian(std::vector<float>{i / 4.0f}),
                           LittleEndian(std::vector<double>{-i / 8.0}),
                           LittleEndian(patch), caption});
  }
  out.schema[kTokens].max_length = longest_tokens;
  out.schema[kCaption].max_length = longest_caption;
  return out;
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

absl::StatusOr<std::string> RecordFieldBytes(const dataset::Dataset& ds,
                                             uint64_t id,
                                             dataset::ReadInfo* info) {
  std::string out;
  absl::Status st = ds.Read(
      id,
      [&](const dataset::RecordView& r) {
        for (std::string_view f : r.fields) {
          out += absl::StrCat(f.size(), ":");
          out.append(f.data(), f.size());
        }
        return absl::OkStatus();
      },
      info);
  if (!st.ok()) return st;
  return out;
}

}  // namespace stoker::testing
