// Field kinds: what one field of a dataset's records holds, and how its
// values are checked. The manifest (manifest.h) names each field's kind;
// the record codec (record.h) stores the values as plain byte strings, so
// kind, dtype and shape live only in the manifest.
//
//   kind                      value (little-endian)         dtype, shape
//   image                     encoded image bytes           uint8, {-1}
//   int64, float32, float64   8, 4 or 8 bytes               implied, {}
//   ndarray                   C-order elements of dtype     declared
//   bytes, str                raw bytes (str: UTF-8)        uint8, {-1}
//
// An ndarray's shape is fixed, or its first dimension is -1: a value is
// then any number of whole rows of prod(shape[1:]) elements.
//
// A kind is one file in kinds/ with one registration line,
//   STOKER_REGISTER_FIELD_KIND(MakeImageKind);
// where MakeImageKind() returns a std::unique_ptr<FieldKind>. CMake picks up
// every file of kinds/ (a glob), so adding a kind is adding its file. The
// kinds are linked as a whole archive (stoker_field_kinds), so no
// registration is dropped by the linker.
//
// Thread-safety: FieldKind objects are immutable and thread-safe; the
// registry is thread-safe and never removes a kind, so a pointer from Find
// stays valid for the life of the process.
#ifndef STOKER_SERVER_DATASET_FIELD_KIND_H_
#define STOKER_SERVER_DATASET_FIELD_KIND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/tensor/dtype.h"

namespace stoker::dataset {

class FieldKind;

// One field of a dataset's schema.
struct FieldSpec {
  std::string name;
  // From FieldKindRegistry; never null in a spec that ParseManifest or
  // MakeFieldSpec returned.
  const FieldKind* kind = nullptr;
  tensor::DType dtype = tensor::DType::kUint8;  // Of the elements.
  // {} for scalars; as declared for ndarray; {-1} for image, bytes, str.
  std::vector<int64_t> shape;
  // Ragged fields (see FieldKind::Passthrough): the longest value pack saw,
  // in rows (ndarray) or bytes; 0: unknown (a dataset of format version 1).
  uint64_t max_length = 0;
  // Spatial (image) fields: how many values are in each encoded format
  // ("jpeg", "png"), as pack found them. Informational.
  std::map<std::string, uint64_t> formats;
};

class FieldKind {
 public:
  // How a field without ops reaches a batch (docs/pipeline-design.md §4.1):
  // a tensor of the field's shape per sample, or a ragged tensor of rows or
  // of bytes.
  enum class Passthrough { kDense, kRaggedRows, kRaggedBytes };

  virtual ~FieldKind() = default;

  // The name manifests use: "image", "ndarray", ...
  virtual std::string_view name() const = 0;

  virtual Passthrough passthrough(const FieldSpec& spec) const = 0;

  // Whether the geometry ops of a pipeline apply to the field: it holds an
  // encoded image.
  virtual bool spatial() const { return false; }

  // Whether a manifest declares the field's dtype and shape (ndarray)
  // rather than the kind implying them.
  virtual bool declares_dtype() const { return false; }

  // Checks and completes a spec whose name, kind and (if declares_dtype)
  // dtype and shape are set: fills in implied dtype and shape, checks
  // declared ones. InvalidArgument whose message starts with the key it
  // concerns, e.g. "shape: dimension 1 is -1; only the first may be -1".
  virtual absl::Status CheckSpec(FieldSpec* spec) const = 0;

  // The check every read makes (Dataset::Read): cheap, size-only. DataLoss
  // unless `value` fits the spec, naming the field: "field 'boxes': 18
  // bytes is not whole rows of 16 bytes".
  virtual absl::Status CheckValue(const FieldSpec& spec,
                                  std::string_view value) const = 0;

  // What pack checks before it stores a value and verify checks again:
  // CheckValue, plus what would cost a pass over the value on every read
  // (str: UTF-8; bool arrays: 0 or 1). Decoding an image is not a kind's
  // job: pack and verify are handed an ImageCheck for spatial fields.
  virtual absl::Status CheckContent(const FieldSpec& spec,
                                    std::string_view value) const {
    return CheckValue(spec, value);
  }

  // A value from the text a CSV cell or a JSONL value holds (the
  // importers, importers/table.cc): a decimal for int64, a number for
  // float32/float64, numbers separated by spaces or commas for ndarray
  // (brackets are ignored, so a JSON array works: "[[1, 2], [3, 4]]"), the
  // text itself for str and bytes. InvalidArgument saying what is wrong
  // ("'x1' is not an int64"); the caller adds file:line and column. The
  // default refuses: an image is never text (an importer reads its path).
  virtual absl::StatusOr<std::string> FromText(const FieldSpec& spec,
                                               std::string_view text) const;
};

// Checks one encoded image as far as pack and `verify --decode` must (a
// full decode) and names its format for the manifest ("jpeg", "png");
// DataLoss for a bad image. The dataset layer does not see the decoders,
// so the composition root passes pipeline::ValidateImage in. Called from
// several threads at once.
using ImageCheck =
    std::function<absl::StatusOr<std::string>(std::string_view bytes)>;

class FieldKindRegistry {
 public:
  FieldKindRegistry() = default;
  FieldKindRegistry(const FieldKindRegistry&) = delete;
  FieldKindRegistry& operator=(const FieldKindRegistry&) = delete;

  // The registry STOKER_REGISTER_FIELD_KIND fills and manifests read.
  static FieldKindRegistry& Global();

  // AlreadyExists when a kind of that name is registered; InvalidArgument
  // for a null kind or a name outside [a-z0-9_]+.
  absl::Status Register(std::unique_ptr<const FieldKind> kind)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The kind named `name`, or null.
  const FieldKind* Find(std::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);

  // Registered names in sorted order.
  std::vector<std::string> Names() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<const FieldKind>, std::less<>> kinds_
      ABSL_GUARDED_BY(mu_);
};

// Registers a kind in FieldKindRegistry::Global() while static objects are
// constructed, and aborts with the reason if that fails: a broken or
// duplicate kind is a programming error, caught by every test binary.
class FieldKindRegistrar {
 public:
  explicit FieldKindRegistrar(std::unique_ptr<const FieldKind> kind);
};

// A checked spec of a kind whose dtype and shape are implied (every kind
// but ndarray). InvalidArgument for an unknown kind or one that declares
// its dtype.
absl::StatusOr<FieldSpec> MakeFieldSpec(std::string name,
                                        std::string_view kind);

// A checked ndarray spec: InvalidArgument for a bad shape.
absl::StatusOr<FieldSpec> MakeArraySpec(std::string name, tensor::DType dtype,
                                        std::vector<int64_t> shape);

// Bytes of one row: prod(shape[1:]) elements, or one element for a scalar.
// 1 for image, bytes and str (uint8, {-1}).
uint64_t RowBytes(const FieldSpec& spec);

// Sets the dtype and shape of a kind of raw bytes (image, bytes, str):
// uint8, {-1}.
void SetBytesType(FieldSpec* spec);

// What max_length counts for a ragged field: rows (kRaggedRows) or bytes.
// REQUIRES: spec.kind->CheckValue(spec, value) is OK.
uint64_t RaggedLength(const FieldSpec& spec, std::string_view value);

// DataLoss "field 'caption': 400 bytes, over the manifest's max_length 311"
// when `length` is above a known max_length; `unit` is "bytes" or "rows".
absl::Status CheckMaxLength(const FieldSpec& spec, uint64_t length,
                            std::string_view unit);

// A short human form for `stoker inspect`: "label (int64)", "boxes
// (ndarray float32 [-1, 4], max_length 57)", "image (image, max_length
// 48213, formats jpeg 1281166, png 1)".
std::string DescribeField(const FieldSpec& spec);

}  // namespace stoker::dataset

// One line per kind file: `make_fn` returns a std::unique_ptr<FieldKind>.
#define STOKER_REGISTER_FIELD_KIND(make_fn)          \
  static const ::stoker::dataset::FieldKindRegistrar \
      stoker_field_kind_registrar_##make_fn(make_fn())

#endif  // STOKER_SERVER_DATASET_FIELD_KIND_H_
