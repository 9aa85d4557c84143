#include "server/dataset/manifest.h"

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <xxhash.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/dataset/file_util.h"

namespace stoker::dataset {
namespace {

using Json = nlohmann::json;

// Checks the parts of one manifest; every error names the file and the key.
class Parser {
 public:
  explicit Parser(std::string_view path) : path_(path.data(), path.size()) {}

  // "manifest PATH: KEY: MSG"; `separator` ".", for a message that begins
  // with the key below KEY (FieldKind::CheckSpec's), gives "KEY.MSG".
  absl::Status Error(absl::string_view key, absl::string_view msg,
                     absl::string_view separator = ": ") const {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest ", path_, ": ", key, separator, msg));
  }

  // `obj` (found at `key`, "" for the whole document) must be an object holding
  // every key of `required` and no key outside `required` and `optional`.
  absl::Status CheckObject(const Json& obj, absl::string_view key,
                           std::initializer_list<const char*> required,
                           std::initializer_list<const char*> optional) const {
    if (!obj.is_object()) {
      return Error(key.empty() ? "(document)" : key, "expected an object");
    }
    for (const char* r : required) {
      if (!obj.contains(r)) return Error(Join(key, r), "missing");
    }
    for (const auto& [k, v] : obj.items()) {
      if (!Contains(required, k) && !Contains(optional, k)) {
        return Error(Join(key, k), "unknown key");
      }
    }
    return absl::OkStatus();
  }

  // Reads obj[k] into `out`; leaves `out` alone if the key is absent.
  absl::Status GetString(const Json& obj, absl::string_view prefix,
                         const char* k, std::string* out) const {
    if (!obj.contains(k)) return absl::OkStatus();
    const Json& v = obj.at(k);
    if (!v.is_string()) return Error(Join(prefix, k), "expected a string");
    *out = v.get<std::string>();
    return absl::OkStatus();
  }

  absl::Status GetUint(const Json& obj, absl::string_view prefix, const char* k,
                       uint64_t* out) const {
    const Json& v = obj.at(k);
    if (!v.is_number_unsigned()) {
      return Error(Join(prefix, k), "expected a non-negative integer");
    }
    *out = v.get<uint64_t>();
    return absl::OkStatus();
  }

  static std::string Join(absl::string_view prefix, absl::string_view key) {
    return prefix.empty() ? std::string(key) : absl::StrCat(prefix, ".", key);
  }

 private:
  static bool Contains(std::initializer_list<const char*> keys,
                       std::string_view k) {
    for (const char* key : keys) {
      if (k == key) return true;
    }
    return false;
  }

  absl::string_view path_;  // Borrowed from ParseManifest's argument.
};

// A format version 1 entry: {name, kind: bytes|int64, content_type}. A bytes
// field whose content type is an image's is read as kind `image`, so every
// dataset packed before version 2 reads as image + label.
absl::Status ParseFieldV1(const Parser& p, const Json& f,
                          const std::string& key, FieldSpec* spec) {
  if (auto s = p.CheckObject(f, key, {"name", "kind"}, {"content_type"});
      !s.ok()) {
    return s;
  }
  std::string kind, content_type;
  if (auto s = p.GetString(f, key, "name", &spec->name); !s.ok()) return s;
  if (auto s = p.GetString(f, key, "kind", &kind); !s.ok()) return s;
  if (auto s = p.GetString(f, key, "content_type", &content_type); !s.ok()) {
    return s;
  }
  if (kind == "bytes") {
    kind = absl::StartsWith(content_type, "image/") ? "image" : "bytes";
  } else if (kind != "int64") {
    return p.Error(key + ".kind", absl::StrCat("is '", kind,
                                               "', expected bytes|int64 "
                                               "(format version 1)"));
  }
  spec->kind = FieldKindRegistry::Global().Find(kind);
  if (spec->kind == nullptr) {  // The kinds are linked whole (CMakeLists.txt).
    return absl::InternalError(
        absl::StrCat("field kind '", kind, "' is not registered"));
  }
  return spec->kind->CheckSpec(spec);
}

// A format version 2 entry: {name, kind, dtype, shape, max_length, formats}
// (manifest.h says which keys each kind takes).
absl::Status ParseFieldV2(const Parser& p, const Json& f,
                          const std::string& key, FieldSpec* spec) {
  if (auto s = p.CheckObject(f, key, {"name", "kind"},
                             {"dtype", "shape", "max_length", "formats"});
      !s.ok()) {
    return s;
  }
  std::string kind;
  if (auto s = p.GetString(f, key, "name", &spec->name); !s.ok()) return s;
  if (auto s = p.GetString(f, key, "kind", &kind); !s.ok()) return s;
  spec->kind = FieldKindRegistry::Global().Find(kind);
  if (spec->kind == nullptr) {
    return p.Error(
        key + ".kind",
        absl::StrCat("is '", kind, "', expected one of ",
                     absl::StrJoin(FieldKindRegistry::Global().Names(), ", ")));
  }
  for (const char* k : {"dtype", "shape"}) {
    if (spec->kind->declares_dtype() && !f.contains(k)) {
      return p.Error(Parser::Join(key, k),
                     absl::StrCat("missing (an ", kind, " field declares it)"));
    }
    if (!spec->kind->declares_dtype() && f.contains(k)) {
      return p.Error(Parser::Join(key, k),
                     absl::StrCat("a field of kind ", kind,
                                  " has none (the kind implies it)"));
    }
  }
  if (f.contains("dtype")) {
    std::string dtype;
    if (auto s = p.GetString(f, key, "dtype", &dtype); !s.ok()) return s;
    const std::optional<tensor::DType> t = tensor::DTypeFromName(dtype);
    if (!t.has_value()) {
      return p.Error(key + ".dtype",
                     absl::StrCat("is '", dtype, "', expected ",
                                  std::string(tensor::DTypeNames())));
    }
    spec->dtype = *t;
  }
  if (f.contains("shape")) {
    const Json& shape = f.at("shape");
    if (!shape.is_array()) return p.Error(key + ".shape", "expected an array");
    for (const Json& d : shape) {
      if (!d.is_number_integer()) {
        return p.Error(key + ".shape", "expected an array of integers");
      }
      spec->shape.push_back(d.get<int64_t>());
    }
  }
  if (absl::Status s = spec->kind->CheckSpec(spec); !s.ok()) {
    return p.Error(key, s.message(), ".");
  }
  if (f.contains("max_length")) {
    if (spec->kind->passthrough(*spec) == FieldKind::Passthrough::kDense) {
      return p.Error(key + ".max_length",
                     "only a field of variable length has one");
    }
    if (auto s = p.GetUint(f, key, "max_length", &spec->max_length); !s.ok()) {
      return s;
    }
  }
  if (f.contains("formats")) {
    const std::string formats_key = key + ".formats";
    if (!spec->kind->spatial()) {
      return p.Error(formats_key, "only an image field has them");
    }
    const Json& formats = f.at("formats");
    if (!formats.is_object()) return p.Error(formats_key, "expected an object");
    for (const auto& [name, count] : formats.items()) {
      uint64_t n = 0;
      if (auto s = p.GetUint(formats, formats_key, name.c_str(), &n); !s.ok()) {
        return s;
      }
      spec->formats[name] = n;
    }
  }
  return absl::OkStatus();
}

absl::Status ParseFields(const Parser& p, int version, const Json& fields,
                         std::vector<FieldSpec>* out) {
  if (!fields.is_array() || fields.empty()) {
    return p.Error("fields", "expected a non-empty array");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string key = absl::StrCat("fields[", i, "]");
    FieldSpec spec;
    if (absl::Status s = version == 1 ? ParseFieldV1(p, fields[i], key, &spec)
                                      : ParseFieldV2(p, fields[i], key, &spec);
        !s.ok()) {
      return s;
    }
    if (spec.name.empty()) return p.Error(key + ".name", "is empty");
    if (!names.insert(spec.name).second) {
      return p.Error(key + ".name",
                     absl::StrCat("duplicate field '", spec.name, "'"));
    }
    out->push_back(std::move(spec));
  }
  return absl::OkStatus();
}

// Whether `name` can name a file inside the dataset directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos;
}

absl::Status CheckDigest(const Parser& p, const std::string& key,
                         const std::string& digest) {
  constexpr absl::string_view kPrefix = "xxh3-128:";
  if (!absl::StartsWith(digest, kPrefix) ||
      digest.size() != kPrefix.size() + 32 ||
      digest.find_first_not_of("0123456789abcdef", kPrefix.size()) !=
          std::string::npos) {
    return p.Error(key, absl::StrCat("is '", digest,
                                     "', expected xxh3-128: and 32 hex "
                                     "digits"));
  }
  return absl::OkStatus();
}

// The optional keys of a shard entry: "digest" and "index".
absl::Status ParseShardExtras(const Parser& p, const Json& s,
                              const std::string& key, ShardInfo* shard) {
  if (auto st = p.GetString(s, key, "digest", &shard->digest); !st.ok()) {
    return st;
  }
  if (s.contains("digest")) {
    if (auto st = CheckDigest(p, key + ".digest", shard->digest); !st.ok()) {
      return st;
    }
  }
  if (!s.contains("index")) return absl::OkStatus();
  const std::string ikey = key + ".index";
  const Json& index = s.at("index");
  if (auto st = p.CheckObject(index, ikey, {"file", "bytes", "digest"}, {});
      !st.ok()) {
    return st;
  }
  if (auto st = p.GetString(index, ikey, "file", &shard->index_file);
      !st.ok()) {
    return st;
  }
  if (!IsPlainFileName(shard->index_file) ||
      shard->index_file == shard->file) {
    return p.Error(ikey + ".file", absl::StrCat("'", shard->index_file,
                                                "' is not a plain file name "
                                                "apart from the shard's"));
  }
  if (auto st = p.GetUint(index, ikey, "bytes", &shard->index_bytes);
      !st.ok()) {
    return st;
  }
  if (auto st = p.GetString(index, ikey, "digest", &shard->index_digest);
      !st.ok()) {
    return st;
  }
  return CheckDigest(p, ikey + ".digest", shard->index_digest);
}

void SerializeShardExtras(const ShardInfo& s, nlohmann::ordered_json* out) {
  if (!s.digest.empty()) (*out)["digest"] = s.digest;
  if (s.has_index()) {
    (*out)["index"] = {{"file", s.index_file},
                       {"bytes", s.index_bytes},
                       {"digest", s.index_digest}};
  }
}

absl::Status ParseShards(const Parser& p, const Json& shards,
                         uint64_t num_samples, std::vector<ShardInfo>* out) {
  if (!shards.is_array() || shards.empty()) {
    return p.Error("shards", "expected a non-empty array");
  }
  std::set<std::string> files;
  uint64_t next_id = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string key = absl::StrCat("shards[", i, "]");
    const Json& s = shards[i];
    if (auto st = p.CheckObject(
            s, key, {"file", "first_id", "num_samples", "bytes"},
            {"digest", "index"});
        !st.ok()) {
      return st;
    }
    ShardInfo shard;
    if (auto st = p.GetString(s, key, "file", &shard.file); !st.ok()) return st;
    for (auto [k, v] : {std::pair{"first_id", &shard.first_id},
                        {"num_samples", &shard.num_samples},
                        {"bytes", &shard.bytes}}) {
      if (auto st = p.GetUint(s, key, k, v); !st.ok()) return st;
    }
    // The file must stay inside the dataset directory.
    if (!IsPlainFileName(shard.file)) {
      return p.Error(key + ".file", absl::StrCat("'", shard.file,
                                                 "' is not a plain file name"));
    }
    if (auto st = ParseShardExtras(p, s, key, &shard); !st.ok()) return st;
    if (!files.insert(shard.file).second) {
      return p.Error(key + ".file",
                     absl::StrCat("duplicate file '", shard.file, "'"));
    }
    if (shard.has_index() && !files.insert(shard.index_file).second) {
      return p.Error(key + ".index.file",
                     absl::StrCat("duplicate file '", shard.index_file, "'"));
    }
    if (shard.first_id != next_id) {
      return p.Error(key + ".first_id",
                     absl::StrCat("is ", shard.first_id, ", expected ", next_id,
                                  " (shard ranges must be contiguous)"));
    }
    if (shard.num_samples == 0) return p.Error(key + ".num_samples", "is 0");
    next_id += shard.num_samples;
    out->push_back(std::move(shard));
  }
  if (next_id != num_samples) {
    return p.Error("shards",
                   absl::StrCat("hold ", next_id, " samples, num_samples is ",
                                num_samples));
  }
  return absl::OkStatus();
}

// "content_digest", when present: 16 lowercase hex digits
// (content_digest.h).
absl::Status ParseContentDigest(const Parser& p, const Json& root,
                                std::string* digest) {
  if (auto s = p.GetString(root, "", "content_digest", digest); !s.ok()) {
    return s;
  }
  if (!root.contains("content_digest")) return absl::OkStatus();
  const bool hex =
      digest->size() == 16 &&
      digest->find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex) return p.Error("content_digest", "expected 16 hex digits");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> ParseManifest(std::string_view json,
                                       std::string_view path_for_errors) {
  const Parser p(path_for_errors);
  const Json root = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return p.Error("(document)", "not valid JSON");
  if (auto s = p.CheckObject(
          root, "",
          {"format_version", "name", "num_samples", "fields", "shards"},
          {"classes", "created", "source", "content_digest"});
      !s.ok()) {
    return s;
  }
  Manifest m;
  const Json& version = root.at("format_version");
  if (!version.is_number_integer()) {
    return p.Error("format_version", "expected an integer");
  }
  if (version.get<int64_t>() < kOldestFormatVersion ||
      version.get<int64_t>() > kFormatVersion) {
    return p.Error("format_version",
                   absl::StrCat("is ", version.dump(), ", this build reads ",
                                kOldestFormatVersion, " to ", kFormatVersion));
  }
  m.format_version = version.get<int>();
  if (auto s = p.GetString(root, "", "name", &m.name); !s.ok()) return s;
  if (m.name.empty()) return p.Error("name", "is empty");
  if (auto s = p.GetUint(root, "", "num_samples", &m.num_samples); !s.ok()) {
    return s;
  }
  if (auto s = ParseFields(p, m.format_version, root.at("fields"), &m.fields);
      !s.ok()) {
    return s;
  }
  if (root.contains("classes")) {
    const Json& classes = root.at("classes");
    if (!classes.is_array()) return p.Error("classes", "expected an array");
    for (size_t i = 0; i < classes.size(); ++i) {
      if (!classes[i].is_string()) {
        return p.Error(absl::StrCat("classes[", i, "]"), "expected a string");
      }
      m.classes.push_back(classes[i].get<std::string>());
    }
  }
  if (auto s = ParseShards(p, root.at("shards"), m.num_samples, &m.shards);
      !s.ok()) {
    return s;
  }
  if (auto s = p.GetString(root, "", "created", &m.created); !s.ok()) return s;
  if (auto s = p.GetString(root, "", "source", &m.source); !s.ok()) return s;
  if (auto s = ParseContentDigest(p, root, &m.content_digest); !s.ok()) {
    return s;
  }
  return m;
}

std::string SerializeManifest(const Manifest& m) {
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  for (const FieldSpec& f : m.fields) {
    nlohmann::ordered_json field = {{"name", f.name},
                                    {"kind", std::string(f.kind->name())}};
    if (f.kind->declares_dtype()) {
      field["dtype"] = std::string(tensor::DTypeName(f.dtype));
      field["shape"] = f.shape;
    }
    if (f.kind->passthrough(f) != FieldKind::Passthrough::kDense &&
        f.max_length > 0) {
      field["max_length"] = f.max_length;
    }
    if (!f.formats.empty()) field["formats"] = f.formats;
    fields.push_back(std::move(field));
  }
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (const ShardInfo& s : m.shards) {
    nlohmann::ordered_json shard = {{"file", s.file},
                                    {"first_id", s.first_id},
                                    {"num_samples", s.num_samples},
                                    {"bytes", s.bytes}};
    SerializeShardExtras(s, &shard);
    shards.push_back(std::move(shard));
  }
  nlohmann::ordered_json root = {{"format_version", kFormatVersion},
                                 {"name", m.name},
                                 {"num_samples", m.num_samples},
                                 {"fields", fields},
                                 {"classes", m.classes},
                                 {"shards", shards},
                                 {"created", m.created},
                                 {"source", m.source}};
  if (!m.content_digest.empty()) root["content_digest"] = m.content_digest;
  // Pack refuses names that are not UTF-8; should one come here anyway, it
  // is replaced (U+FFFD) rather than thrown as an exception.
  return root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kManifestFile);
  std::string text;
  if (absl::Status s = ReadFileToString(path, &text); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("manifest ", path, ": ", s.message()));
  }
  return ParseManifest(text, path);
}

std::string ManifestDigest(const Manifest& m) {
  const std::string text = SerializeManifest(m);
  return absl::StrFormat("%016x", XXH3_64bits(text.data(), text.size()));
}

}  // namespace stoker::dataset
