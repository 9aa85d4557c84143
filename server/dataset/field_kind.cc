#include "server/dataset/field_kind.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::dataset {
namespace {

bool IsKindName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<const FieldKind*> FindKind(std::string_view kind) {
  const FieldKind* k = FieldKindRegistry::Global().Find(kind);
  if (k == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown field kind '", std::string(kind), "' (known: ",
        absl::StrJoin(FieldKindRegistry::Global().Names(), ", "), ")"));
  }
  return k;
}

}  // namespace

FieldKindRegistry& FieldKindRegistry::Global() {
  static FieldKindRegistry* const registry = new FieldKindRegistry();
  return *registry;
}

absl::Status FieldKindRegistry::Register(
    std::unique_ptr<const FieldKind> kind) {
  if (kind == nullptr) return absl::InvalidArgumentError("null field kind");
  const std::string name(kind->name());
  if (!IsKindName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("field kind '", name, "': name must match [a-z0-9_]+"));
  }
  absl::MutexLock lock(&mu_);
  if (!kinds_.emplace(name, std::move(kind)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("field kind '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

const FieldKind* FieldKindRegistry::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  const auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : it->second.get();
}

std::vector<std::string> FieldKindRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(kinds_.size());
  for (const auto& [name, kind] : kinds_) names.push_back(name);
  return names;
}

FieldKindRegistrar::FieldKindRegistrar(std::unique_ptr<const FieldKind> kind) {
  const absl::Status status =
      FieldKindRegistry::Global().Register(std::move(kind));
  if (!status.ok()) {
    std::fprintf(stderr, "stoker: cannot register field kind: %s\n",
                 status.ToString().c_str());
    std::abort();
  }
}

absl::StatusOr<FieldSpec> MakeFieldSpec(std::string name,
                                        std::string_view kind) {
  absl::StatusOr<const FieldKind*> k = FindKind(kind);
  if (!k.ok()) return k.status();
  if ((*k)->declares_dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", name, "': kind '", std::string(kind),
                     "' needs a dtype and shape (MakeArraySpec)"));
  }
  FieldSpec spec;
  spec.name = std::move(name);
  spec.kind = *k;
  if (absl::Status s = spec.kind->CheckSpec(&spec); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", spec.name, "': ", s.message()));
  }
  return spec;
}

absl::StatusOr<FieldSpec> MakeArraySpec(std::string name, tensor::DType dtype,
                                        std::vector<int64_t> shape) {
  absl::StatusOr<const FieldKind*> k = FindKind("ndarray");
  if (!k.ok()) return k.status();
  FieldSpec spec;
  spec.name = std::move(name);
  spec.kind = *k;
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  if (absl::Status s = spec.kind->CheckSpec(&spec); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", spec.name, "': ", s.message()));
  }
  return spec;
}

uint64_t RowBytes(const FieldSpec& spec) {
  uint64_t bytes = tensor::DTypeSize(spec.dtype);
  for (size_t i = 1; i < spec.shape.size(); ++i) {
    bytes *= static_cast<uint64_t>(spec.shape[i]);
  }
  return bytes;
}

void SetBytesType(FieldSpec* spec) {
  spec->dtype = tensor::DType::kUint8;
  spec->shape = {-1};
}

uint64_t RaggedLength(const FieldSpec& spec, std::string_view value) {
  return spec.kind->passthrough(spec) == FieldKind::Passthrough::kRaggedRows
             ? value.size() / RowBytes(spec)
             : value.size();
}

absl::Status CheckMaxLength(const FieldSpec& spec, uint64_t length,
                            std::string_view unit) {
  if (spec.max_length == 0 || length <= spec.max_length) {
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat("field '", spec.name, "': ", length, " ", std::string(unit),
                   ", over the manifest's max_length ", spec.max_length));
}

std::string DescribeField(const FieldSpec& spec) {
  std::string out =
      absl::StrCat(spec.name, " (", std::string(spec.kind->name()));
  if (spec.kind->declares_dtype()) {
    absl::StrAppend(&out, " ", std::string(tensor::DTypeName(spec.dtype)), " [",
                    absl::StrJoin(spec.shape, ", "), "]");
  }
  if (spec.max_length > 0) {
    absl::StrAppend(&out, ", max_length ", spec.max_length);
  }
  if (!spec.formats.empty()) {
    absl::StrAppend(
        &out, ", formats ",
        absl::StrJoin(spec.formats, ", ", absl::PairFormatter(" ")));
  }
  return out + ")";
}

absl::StatusOr<std::string> FieldKind::FromText(const FieldSpec& spec,
                                                std::string_view) const {
  return absl::InvalidArgumentError(
      absl::StrCat("field '", spec.name, "': a ", std::string(name()),
                   " value cannot be given as text"));
}

}  // namespace stoker::dataset
