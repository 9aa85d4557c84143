#include "server/dataset/packer.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dataset/content_digest.h"
#include "server/dataset/file_util.h"
#include "server/dataset/importer.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/pack_dest.h"
#include "server/dataset/record.h"
#include "server/dataset/shard_index.h"
#include "server/dataset/skip_summary.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxFileBytes = (uint64_t{1} << 32) - 1;
// A write transaction is committed after this many records or bytes, which
// bounds LMDB's dirty page list.
constexpr uint64_t kTxnRecords = 1024;
constexpr uint64_t kTxnBytes = uint64_t{64} << 20;

// What the scan learnt about one sample.
struct Scanned {
  bool ok = false;
  uint64_t bytes = 0;  // Of its values.
  uint64_t hash = 0;   // Of its values, framed.
  std::string reason;  // Why it is bad, when !ok.
  // The reason is this build's, not the sample's (a decoder it lacks):
  // the pack stops whatever on_error says, so no such sample is dropped.
  bool fatal = false;
  // Per field: RaggedLength for ragged fields, else 0.
  std::vector<uint64_t> lengths;
  // Per field: what PackOptions::validate named for a spatial one, or "".
  std::vector<std::string> formats;
};

Scanned Bad(std::string reason) {
  Scanned s;
  s.reason = std::move(reason);
  return s;
}

uint64_t HashValues(const std::vector<std::string>& values) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const std::string& v : values) {
    const uint64_t size = v.size();
    XXH3_64bits_update(state, &size, sizeof(size));
    XXH3_64bits_update(state, v.data(), v.size());
  }
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

// Reads sample i and checks every value against its field.
Scanned Scan(const Importer& importer, uint64_t i,
             absl::Span<const FieldSpec> schema, const PackOptions& o) {
  std::vector<std::string> values;
  if (absl::Status s = importer.Read(i, &values); !s.ok()) {
    return Bad(std::string(s.message()));
  }
  if (values.size() != schema.size()) {
    return Bad(absl::StrCat("has ", values.size(), " values for ",
                            schema.size(), " fields"));
  }
  Scanned good;
  for (size_t f = 0; f < schema.size(); ++f) {
    const FieldSpec& field = schema[f];
    const std::string& value = values[f];
    if (value.size() > kMaxFileBytes) {
      return Bad(absl::StrCat("field '", field.name, "' is larger than 4 GiB"));
    }
    if (absl::Status s = field.kind->CheckContent(field, value); !s.ok()) {
      return Bad(std::string(s.message()));
    }
    std::string format;
    if (field.kind->spatial() && o.validate) {
      absl::StatusOr<std::string> named = o.validate(value);
      if (!named.ok()) {
        Scanned bad = Bad(std::string(named.status().message()));
        bad.fatal = absl::IsFailedPrecondition(named.status());
        return bad;
      }
      format = *std::move(named);
    }
    good.formats.push_back(std::move(format));
    good.lengths.push_back(field.kind->passthrough(field) ==
                                   FieldKind::Passthrough::kDense
                               ? 0
                               : RaggedLength(field, value));
    good.bytes += value.size();
  }
  good.ok = true;
  good.hash = HashValues(values);
  return good;
}

// The samples of one shard: indices into the listing, in id order.
struct ShardPlan {
  std::string file;
  uint64_t first_id = 0;
  std::vector<uint64_t> sources;
  uint64_t source_bytes = 0;
};

// Writes one shard file, appending its records in key order, and returns
// its size.
absl::StatusOr<uint64_t> WriteShard(
    const std::string& path, const ShardPlan& plan, const Importer& importer,
    const ImportListing& listing, const std::vector<Scanned>& scanned,
    absl::Span<const FieldSpec> schema, ProgressCounter* progress) {
  // LMDB stores a large value on its own pages, so a record costs at most
  // its size plus one page plus node overhead; twice that, as address space
  // rather than disk, leaves room for the tree.
  const uint64_t worst = plan.source_bytes + plan.sources.size() * 4300;
  const uint64_t map_size = ((2 * worst >> 20) + 2) << 20;
  absl::StatusOr<EnvPtr> env = CreateShardForWrite(path, map_size);
  if (!env.ok()) return env.status();
  MDB_dbi dbi = 0;
  TxnPtr txn;
  uint64_t txn_records = 0, txn_bytes = 0;
  auto commit = [&]() -> absl::Status {
    txn_records = txn_bytes = 0;
    if (int rc = mdb_txn_commit(txn.release()); rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot commit to ", path));
    }
    return absl::OkStatus();
  };
  std::vector<std::string> values;
  for (size_t i = 0; i < plan.sources.size(); ++i) {
    if (txn == nullptr) {
      MDB_txn* raw = nullptr;
      if (int rc = mdb_txn_begin(env->get(), nullptr, 0, &raw); rc != 0) {
        return LmdbError(rc, absl::StrCat("cannot write ", path));
      }
      txn.reset(raw);
      if (int rc = mdb_dbi_open(raw, nullptr, MDB_CREATE, &dbi); rc != 0) {
        return LmdbError(rc,
                         absl::StrCat("cannot open the database in ", path));
      }
    }
    const uint64_t index = plan.sources[i];
    const std::string& where = listing.samples[index];
    const Scanned& scan = scanned[index];
    absl::Status read = importer.Read(index, &values);
    if (read.ok() && HashValues(values) != scan.hash) {
      read = absl::AbortedError("changed since it was scanned");
    }
    if (!read.ok()) {
      return absl::Status(read.code(),
                          absl::StrCat(where, ": ", read.message()));
    }
    std::vector<std::string_view> views(values.begin(), values.end());
    for (size_t f = 0; f < schema.size(); ++f) {
      if (absl::Status s = schema[f].kind->CheckContent(schema[f], views[f]);
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
      }
    }
    const std::string value = EncodeRecord(views);
    const std::string key = EncodeKey(plan.first_id + i);
    MDB_val k = ToVal(key), v = ToVal(value);
    if (int rc = mdb_put(txn.get(), dbi, &k, &v, MDB_APPEND); rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot write key ", plan.first_id + i,
                                        " to ", path));
    }
    progress->Add(1, scan.bytes);
    ++txn_records;
    txn_bytes += value.size();
    if (txn_records >= kTxnRecords || txn_bytes >= kTxnBytes) {
      if (absl::Status s = commit(); !s.ok()) return s;
    }
  }
  if (txn != nullptr) {
    if (absl::Status s = commit(); !s.ok()) return s;
  }
  if (int rc = mdb_env_sync(env->get(), 1); rc != 0) {
    return LmdbError(rc, absl::StrCat("cannot sync ", path));
  }
  env->reset();
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot stat ", path));
  return size;
}

std::string NowUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Splits `good` (listing indices in id order) into `shards` contiguous
// plans of nearly equal count.
std::vector<ShardPlan> PlanShards(const std::vector<uint64_t>& good,
                                  const std::vector<Scanned>& scanned,
                                  uint64_t shards) {
  std::vector<ShardPlan> plans(shards);
  for (uint64_t s = 0; s < shards; ++s) {
    ShardPlan& plan = plans[s];
    plan.file = absl::StrFormat("shard-%05d.lmdb", s);
    plan.first_id = s * good.size() / shards;
    const uint64_t end = (s + 1) * good.size() / shards;
    plan.sources.assign(good.begin() + plan.first_id, good.begin() + end);
    for (uint64_t i : plan.sources) plan.source_bytes += scanned[i].bytes;
  }
  return plans;
}

absl::Status FailedOn(const SkippedFile& bad) {
  return absl::InvalidArgumentError(absl::StrCat(
      bad.path, ": ", bad.reason, " (on_error is fail: pack stopped)"));
}

struct ScanResult {
  std::vector<Scanned> scanned;      // One per listed sample.
  std::vector<uint64_t> good;        // Indices of the good ones, in order.
  std::vector<SkippedFile> skipped;  // Rejected entries, then bad samples.
};

// Pass 1: reads and checks every listed sample. With kFail, the first bad
// one stops the others early and is returned as the error.
absl::StatusOr<ScanResult> ScanAll(const Importer& importer,
                                   const ImportListing& listing,
                                   const PackOptions& o, int threads) {
  ScanResult r;
  r.scanned.resize(listing.samples.size());
  std::atomic<bool> failed{false};
  {
    ProgressCounter progress(o.progress, "scan", r.scanned.size());
    ParallelFor(threads, r.scanned.size(), [&](uint64_t i) {
      if (failed) return;
      r.scanned[i] = Scan(importer, i, listing.schema, o);
      if (!r.scanned[i].ok &&
          (o.on_error == OnError::kFail || r.scanned[i].fatal)) {
        failed = true;
      }
      progress.Add(1, r.scanned[i].bytes);
    });
  }
  for (uint64_t i = 0; i < r.scanned.size(); ++i) {
    if (r.scanned[i].fatal) {
      return absl::FailedPreconditionError(
          absl::StrCat(listing.samples[i], ": ", r.scanned[i].reason,
                       " (pack stopped whatever --on-error says)"));
    }
  }
  r.skipped = listing.rejected;
  for (uint64_t i = 0; i < r.scanned.size(); ++i) {
    if (r.scanned[i].ok) {
      r.good.push_back(i);
    } else if (!r.scanned[i].reason.empty()) {  // Empty: never scanned.
      r.skipped.push_back({listing.samples[i], r.scanned[i].reason});
    }
  }
  if (o.on_error == OnError::kFail && !r.skipped.empty()) {
    return FailedOn(r.skipped.front());
  }
  return r;
}

// The importer's schema with what the scan saw: each ragged field's
// longest value as its max_length, and the formats of spatial fields.
std::vector<FieldSpec> CompleteSchema(std::vector<FieldSpec> schema,
                                      const ScanResult& scan) {
  for (uint64_t i : scan.good) {
    const Scanned& sample = scan.scanned[i];
    for (size_t f = 0; f < schema.size(); ++f) {
      schema[f].max_length = std::max(schema[f].max_length, sample.lengths[f]);
      if (!sample.formats[f].empty()) ++schema[f].formats[sample.formats[f]];
    }
  }
  return schema;
}

// Bytes of a record's value around its values: the framing (record.h).
uint64_t RecordOverhead(size_t fields) { return 4 + 4 * fields + 8; }

// Pass 2: splits the good files into shards of contiguous ids and writes
// them into `dir` in parallel. Refuses before writing when the files alone
// do not fit in the free space, and says how much is needed when a write
// fails on a (then) full filesystem, where LMDB's short write reads only
// "Input/output error".
absl::StatusOr<std::vector<ShardInfo>> WriteShards(
    const std::string& dir, const std::string& dst, const Importer& importer,
    const ImportListing& listing, const ScanResult& scan,
    absl::Span<const FieldSpec> schema, const PackOptions& o, int threads) {
  uint64_t total_bytes = 0;
  for (uint64_t i : scan.good) total_bytes += scan.scanned[i].bytes;
  const uint64_t auto_shards =
      (total_bytes + kAutoShardBytes - 1) / kAutoShardBytes;
  const uint64_t count = std::clamp<uint64_t>(
      o.shards > 0 ? o.shards : auto_shards, 1, scan.good.size());
  const std::vector<ShardPlan> plans =
      PlanShards(scan.good, scan.scanned, count);
  std::vector<uint64_t> values;
  for (uint64_t i : scan.good) {
    values.push_back(scan.scanned[i].bytes + RecordOverhead(schema.size()));
  }
  const uint64_t needed = EstimateShardBytes(values, count);
  const uint64_t free = FreeBytes(dir);
  if (free > 0 && free < total_bytes) {
    return NoSpaceError(dst, needed, free, "");
  }
  std::vector<absl::StatusOr<uint64_t>> sizes(count, uint64_t{0});
  {
    ProgressCounter progress(o.progress, "write", scan.good.size());
    ParallelFor(threads, count, [&](uint64_t s) {
      sizes[s] = WriteShard(absl::StrCat(dir, "/", plans[s].file), plans[s],
                            importer, listing, scan.scanned, schema, &progress);
    });
  }
  std::vector<ShardInfo> shards;
  for (uint64_t s = 0; s < count; ++s) {
    if (!sizes[s].ok()) {
      // A full filesystem now, or a pack that could never have fitted.
      if (free > 0 && (needed > free || FreeBytes(dir) < 64 * 4096)) {
        return NoSpaceError(dst, needed, free, sizes[s].status().message());
      }
      return sizes[s].status();
    }
    shards.push_back(
        {plans[s].file, plans[s].first_id, plans[s].sources.size(), *sizes[s]});
  }
  return shards;
}

}  // namespace

absl::StatusOr<PackReport> Pack(const PackOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const int sources =
      (o.importer != nullptr) + !o.src.empty() + !o.list_file.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one source: a folder, a list file or an importer");
  }
  std::shared_ptr<Importer> importer = o.importer;
  if (!o.src.empty()) importer = MakeImageFolderImporter(o.src);
  if (!o.list_file.empty()) importer = MakePathLabelListImporter(o.list_file);
  const std::string source = importer->source();
  std::string dst = o.dst;
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  if (dst.empty()) return absl::InvalidArgumentError("no destination given");
  if (o.shards < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shards is ", o.shards));
  }
  if (absl::Status s = CheckDestination(dst, o.force); !s.ok()) return s;
  if (absl::Status s = CheckDestParent(dst); !s.ok()) return s;
  std::error_code ec;
  if (fs::is_directory(source, ec) && IsInside(dst, source)) {
    // A second pack would list the first one's files as a class.
    return absl::InvalidArgumentError(
        absl::StrCat("destination ", dst, " is inside the source ", source));
  }

  absl::StatusOr<ImportListing> listing = importer->List();
  if (!listing.ok()) return listing.status();
  if (listing->samples.empty() && listing->rejected.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no files to pack in ", source));
  }
  if (o.on_error == OnError::kFail && !listing->rejected.empty()) {
    return FailedOn(listing->rejected.front());
  }
  for (const FieldSpec& field : listing->schema) {
    if (IsUtf8(field.name)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("field name '", EscapeNonUtf8(field.name), "' in ",
                     EscapeNonUtf8(source), " is not UTF-8"));
  }

  // Class names and the dataset name go into manifest.json, whose strings
  // must be UTF-8.
  for (const std::string& name : listing->classes) {
    if (IsUtf8(name)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "class folder '", EscapeNonUtf8(name), "' in ", EscapeNonUtf8(source),
        " has a name that is not UTF-8; class names are stored in the "
        "manifest as text: rename the folder (e.g. convmv -f latin1 -t utf8 "
        "-r --notest ",
        EscapeNonUtf8(source), ")"));
  }
  const std::string name =
      o.name.empty() ? fs::path(dst).filename().string() : o.name;
  if (!IsUtf8(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset name '", EscapeNonUtf8(name),
                     "' is not UTF-8; give one with --name"));
  }

  for (const std::string& line : RemoveStaleTempDirs(dst)) {
    if (o.notice) o.notice(line);
  }
  absl::StatusOr<std::unique_ptr<PackTempDir>> temp = PackTempDir::Create(dst);
  if (!temp.ok()) return temp.status();
  const std::string& tmp = (*temp)->path();
  const int threads = ResolveThreads(o.threads);

  absl::StatusOr<ScanResult> scan = ScanAll(*importer, *listing, o, threads);
  if (!scan.ok()) return scan.status();
  if (scan->good.empty()) {
    // Say why, by reason: the report that lists them all never comes.
    return absl::InvalidArgumentError(absl::StrCat(
        "nothing to pack: all ", scan->skipped.size(), " samples in ", source,
        " were skipped, for these reasons:\n",
        SummarizeSkipped(scan->skipped)));
  }
  std::vector<FieldSpec> schema = CompleteSchema(listing->schema, *scan);
  absl::StatusOr<std::vector<ShardInfo>> shards =
      WriteShards(tmp, dst, *importer, *listing, *scan, schema, o, threads);
  if (!shards.ok()) return shards.status();
  if (absl::Status s = IndexShards(tmp, &*shards, threads); !s.ok()) {
    if (FreeBytes(tmp) < 64 * 4096) {
      return NoSpaceError(dst, 64 * 4096, FreeBytes(tmp), s.message());
    }
    return s;
  }

  PackReport report;
  report.skipped = std::move(scan->skipped);
  Manifest& m = report.manifest;
  m.name = name;
  m.num_samples = scan->good.size();
  m.fields = std::move(schema);
  m.classes = listing->classes;
  m.shards = *std::move(shards);
  m.created = NowUtc();
  m.source = EscapeNonUtf8(fs::absolute(source, ec).string());
  // From the shards as written: what a daemon computes from them too.
  absl::StatusOr<std::string> digest = ComputeContentDigest(tmp, m);
  if (!digest.ok()) return digest.status();
  m.content_digest = *std::move(digest);
  if (absl::Status s = WriteManifest(tmp, m); !s.ok()) {
    if (FreeBytes(tmp) < 64 * 4096) {
      return NoSpaceError(dst, 64 * 4096, FreeBytes(tmp), s.message());
    }
    return s;
  }

  // Replace DST (checked again: it may have appeared during the pack).
  if (absl::Status s = CheckDestination(dst, o.force); !s.ok()) return s;
  if (absl::Status s = (*temp)->RemoveMarker(); !s.ok()) return s;
  if (absl::Status s = Publish(tmp, dst); !s.ok()) return s;
  (*temp)->Keep();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace stoker::dataset
