// `--from efficient-pytorch-lmdb`: the LMDB that Lyken17/Efficient-PyTorch's
// tools/folder2lmdb.py writes from an ImageFolder: values under keys b"0",
// b"1", ... plus b"__keys__" and b"__len__". SRC is the LMDB file (as the
// tool writes it, subdir=False) or a folder holding data.mdb.
//
// A value is one of
//   msgpack  [{b'data': <encoded image>}, label]    (or [<image>, label])
//   pickle   (<encoded image>, label)               protocols 2 to 5
// read by msgpack_reader.h and pickle_reader.h, neither of which can run
// code: a pickle that would construct an object is a bad sample, refused.
// The tool's first version stored pyarrow.serialize() buffers; those are
// recognized by their framing and refused with a note to convert them
// (pyarrow.serialize is gone from pyarrow, so no reader is attempted).
//
// Samples are keys 0 .. __len__ - 1 (__len__ in either encoding, and fewer
// than the keys the LMDB holds; without it, every key but __keys__ and
// __len__, in LMDB's order).

#include <lmdb.h>

#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/importers/importers.h"
#include "server/dataset/importers/msgpack_reader.h"
#include "server/dataset/importers/pickle_reader.h"
#include "server/dataset/lmdb_util.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;

// pyarrow.serialize's buffer: int32 counts of tensors, ndarrays and
// buffers, padding to 8 bytes, then an Arrow IPC stream, whose messages
// start with the continuation marker 0xFFFFFFFF.
bool LooksLikePyarrow(std::string_view v) {
  if (v.size() < 24) return false;
  const std::string_view marker("\xff\xff\xff\xff", 4);
  for (size_t at : {8, 12, 16}) {
    if (v.substr(at, 4) != marker) continue;
    bool small = true;
    for (size_t i = 0; i + 4 <= at; i += 4) {
      small &= v[i + 2] == 0 && v[i + 3] == 0;  // Counts below 65536.
    }
    if (small) return true;
  }
  return false;
}

constexpr char kPyarrow[] =
    "a pyarrow.serialize() value, which this reader does not take (pyarrow "
    "removed that format); convert the LMDB to the msgpack or pickle "
    "variant first, e.g. with folder2lmdb.py from the images";

// The (image, label) of one value.
absl::Status Decode(std::string_view v, std::string* image, int64_t* label) {
  if (!v.empty() && v[0] == '\x80') {  // PROTO: a pickle.
    absl::StatusOr<PyValue> p = ParsePickle(v);
    if (!p.ok()) return p.status();
    if (p->type != PyValue::Type::kTuple && p->type != PyValue::Type::kList) {
      return absl::DataLossError("pickle: not an (image, label) pair");
    }
    if (p->items.size() != 2 || p->items[0].type != PyValue::Type::kBytes ||
        p->items[1].type != PyValue::Type::kInt) {
      return absl::DataLossError(
          "pickle: not an (image bytes, int label) pair");
    }
    *image = std::move(p->items[0].bytes);
    *label = p->items[1].integer;
    return absl::OkStatus();
  }
  if (!v.empty() && (v[0] == '\x92' || v[0] == '\xdc')) {  // A msgpack array.
    absl::StatusOr<MsgValue> m = ParseMsgpack(v);
    if (!m.ok()) return m.status();
    if (m->type != MsgValue::Type::kArray || m->items.size() != 2) {
      return absl::DataLossError("msgpack: not an [image, label] pair");
    }
    const MsgValue* data = &m->items[0];
    if (data->type == MsgValue::Type::kMap) {
      const MsgValue* found = nullptr;
      for (size_t i = 0; i + 1 < data->items.size(); i += 2) {
        const MsgValue& key = data->items[i];
        if ((key.type == MsgValue::Type::kBin ||
             key.type == MsgValue::Type::kStr) &&
            key.bytes == "data") {
          found = &data->items[i + 1];
        }
      }
      if (found == nullptr) {
        return absl::DataLossError("msgpack: the image map has no b'data'");
      }
      data = found;
    }
    const MsgValue& l = m->items[1];
    if ((data->type != MsgValue::Type::kBin &&
         data->type != MsgValue::Type::kStr) ||
        l.type != MsgValue::Type::kInt || l.unsigned_overflow) {
      return absl::DataLossError(
          "msgpack: not an [image bytes, int label] pair");
    }
    *image = std::string(data->bytes);
    *label = l.integer;
    return absl::OkStatus();
  }
  if (LooksLikePyarrow(v)) return absl::FailedPreconditionError(kPyarrow);
  return absl::DataLossError(
      "neither a pickle (b'\\x80...') nor a msgpack pair (b'\\x92...')");
}

class EfficientLmdbImporter final : public Importer {
 public:
  explicit EfficientLmdbImporter(std::string src) : src_(std::move(src)) {}

  std::string source() const override { return src_; }

  absl::StatusOr<ImportListing> List() override {
    std::error_code ec;
    if (!fs::exists(src_, ec)) {
      return absl::NotFoundError(absl::StrCat(src_, " does not exist"));
    }
    MDB_env* raw = nullptr;
    if (int rc = mdb_env_create(&raw); rc != 0) {
      return LmdbError(rc, "cannot create an LMDB environment");
    }
    env_.reset(raw);
    // Read-only and without the lock file: the source is not ours to
    // write, and nothing else may write it during a pack.
    const unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS |
                           (fs::is_directory(src_, ec) ? 0 : MDB_NOSUBDIR);
    mdb_env_set_maxreaders(raw, 512);
    if (int rc = mdb_env_open(raw, src_.c_str(), flags, 0); rc != 0) {
      return LmdbError(rc, absl::StrCat("cannot open the LMDB ", src_));
    }
    ImportListing out;
    absl::StatusOr<FieldSpec> image = MakeFieldSpec("image", "image");
    if (!image.ok()) return image.status();
    absl::StatusOr<FieldSpec> label = MakeFieldSpec("label", "int64");
    if (!label.ok()) return label.status();
    out.schema = {*std::move(image), *std::move(label)};

    std::string len_value;
    absl::Status got = Get("__len__", &len_value);
    if (got.ok()) {
      int64_t n = -1;
      absl::StatusOr<MsgValue> m = ParseMsgpack(len_value);
      absl::StatusOr<PyValue> p = ParsePickle(len_value);
      if (m.ok() && m->type == MsgValue::Type::kInt) n = m->integer;
      if (p.ok() && p->type == PyValue::Type::kInt) n = p->integer;
      if (n < 0 && LooksLikePyarrow(len_value)) {
        return absl::FailedPreconditionError(
            absl::StrCat(src_, " key __len__: ", kPyarrow));
      }
      if (n < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            src_, " key __len__: not a msgpack or pickle integer"));
      }
      // __len__ sizes the listing: a count beyond the keys the LMDB holds
      // cannot be its samples, and would cost memory and a line per key.
      absl::StatusOr<uint64_t> entries = Entries();
      if (!entries.ok()) return entries.status();
      if (static_cast<uint64_t>(n) >= *entries) {
        return absl::InvalidArgumentError(absl::StrCat(
            src_, " key __len__: says ", n, " samples, but the LMDB holds ",
            *entries, " keys in all, __len__ among them"));
      }
      for (int64_t i = 0; i < n; ++i) keys_.push_back(absl::StrCat(i));
    } else if (absl::IsNotFound(got)) {
      if (absl::Status s = AllKeys(); !s.ok()) return s;
    } else {
      return got;
    }
    // A pyarrow LMDB is refused whole, by its first value, rather than
    // every sample skipped one by one.
    std::string first;
    if (!keys_.empty() && Get(keys_[0], &first).ok() &&
        LooksLikePyarrow(first)) {
      return absl::FailedPreconditionError(
          absl::StrCat(src_, " key ", keys_[0], ": ", kPyarrow));
    }
    for (const std::string& k : keys_) {
      out.samples.push_back(absl::StrCat(src_, " key ", k));
    }
    return out;
  }

  absl::Status Read(uint64_t i,
                    std::vector<std::string>* values) const override {
    std::string v;
    if (absl::Status s = Get(keys_[i], &v); !s.ok()) return s;
    values->resize(2);
    int64_t label = 0;
    if (absl::Status s = Decode(v, &(*values)[0], &label); !s.ok()) return s;
    (*values)[1] = EncodeInt64(label);
    return absl::OkStatus();
  }

 private:
  // Begins a read transaction into `*txn` and opens the unnamed database
  // into `*dbi`.
  absl::Status BeginRead(TxnPtr* txn, MDB_dbi* dbi) const {
    MDB_txn* raw = nullptr;
    if (int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &raw);
        rc != 0) {
      return LmdbError(rc, "cannot begin a read");
    }
    txn->reset(raw);
    if (int rc = mdb_dbi_open(raw, nullptr, 0, dbi); rc != 0) {
      return LmdbError(rc, "cannot open the database");
    }
    return absl::OkStatus();
  }

  // The value of `key`; NotFound if there is none.
  absl::Status Get(const std::string& key, std::string* out) const {
    TxnPtr txn;
    MDB_dbi dbi = 0;
    if (absl::Status s = BeginRead(&txn, &dbi); !s.ok()) return s;
    MDB_txn* raw = txn.get();
    MDB_val k = ToVal(key), v;
    const int rc = mdb_get(raw, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return absl::NotFoundError("no such key");
    if (rc != 0) return LmdbError(rc, "cannot read");
    out->assign(ToView(v));
    return absl::OkStatus();
  }

  // The number of keys in the LMDB.
  absl::StatusOr<uint64_t> Entries() const {
    TxnPtr txn;
    MDB_dbi dbi = 0;
    if (absl::Status s = BeginRead(&txn, &dbi); !s.ok()) return s;
    MDB_txn* raw = txn.get();
    MDB_stat stat;
    if (int rc = mdb_stat(raw, dbi, &stat); rc != 0) {
      return LmdbError(rc, "cannot count the keys");
    }
    return static_cast<uint64_t>(stat.ms_entries);
  }

  absl::Status AllKeys() {
    TxnPtr txn;
    MDB_dbi dbi = 0;
    if (absl::Status s = BeginRead(&txn, &dbi); !s.ok()) return s;
    MDB_txn* raw = txn.get();
    MDB_cursor* c = nullptr;
    if (int rc = mdb_cursor_open(raw, dbi, &c); rc != 0) {
      return LmdbError(rc, "cannot open a cursor");
    }
    CursorPtr cursor(c);
    MDB_val k, v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
      std::string key(ToView(k));
      if (key != "__keys__" && key != "__len__") keys_.push_back(key);
    }
    return absl::OkStatus();
  }

  const std::string src_;
  EnvPtr env_;  // Set by List.
  std::vector<std::string> keys_;
};

}  // namespace

std::unique_ptr<Importer> MakeEfficientLmdbImporter(std::string src) {
  return std::make_unique<EfficientLmdbImporter>(std::move(src));
}

}  // namespace stoker::dataset
