#include "server/service/catalog.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::service {
namespace {

template <typename Map>
std::string Names(const Map& map) {
  std::vector<std::string> names;
  for (const auto& [name, unused] : map) names.push_back(name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// A name from a request, as an error message may echo it: at most 64
// bytes, so that a huge name cannot make the message over gRPC's bounds.
std::string Echo(const std::string& name) {
  constexpr size_t kMax = 64;
  if (name.size() <= kMax) return absl::StrCat("'", name, "'");
  return absl::StrCat("'", name.substr(0, kMax), "...' (", name.size(),
                      " bytes)");
}

template <typename T>
std::map<std::string, std::shared_ptr<const T>> Shared(
    std::map<std::string, std::unique_ptr<T>> map) {
  std::map<std::string, std::shared_ptr<const T>> out;
  for (auto& [name, p] : map) out[name] = std::move(p);
  return out;
}

}  // namespace

Catalog::Catalog(
    std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets,
    std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines)
    : datasets_(Shared(std::move(datasets))),
      pipelines_(Shared(std::move(pipelines))) {}

Catalog::Catalog(DatasetMap datasets, PipelineMap pipelines)
    : datasets_(std::move(datasets)), pipelines_(std::move(pipelines)) {}

std::shared_ptr<const Catalog> Catalog::WithDataset(
    const std::string& name,
    std::shared_ptr<const dataset::Dataset> dataset) const {
  DatasetMap datasets = datasets_;
  datasets[name] = std::move(dataset);
  return std::make_shared<const Catalog>(std::move(datasets), pipelines_);
}

std::shared_ptr<const Catalog> Catalog::WithoutDataset(
    const std::string& name) const {
  DatasetMap datasets = datasets_;
  datasets.erase(name);
  return std::make_shared<const Catalog>(std::move(datasets), pipelines_);
}

absl::StatusOr<const dataset::Dataset*> Catalog::FindDataset(
    const std::string& name) const {
  auto it = datasets_.find(name);
  if (it == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "dataset ", Echo(name), " is not served; served: ", Names(datasets_)));
  }
  return it->second.get();
}

absl::StatusOr<const pipeline::Pipeline*> Catalog::FindPipeline(
    const std::string& name) const {
  auto it = pipelines_.find(name);
  if (it == pipelines_.end()) {
    return absl::NotFoundError(absl::StrCat("pipeline ", Echo(name),
                                            " is not configured; known: ",
                                            Names(pipelines_)));
  }
  return it->second.get();
}

std::vector<tensor::TensorSpec> Catalog::OutputsOf(
    const pipeline::Pipeline& pipeline) const {
  std::optional<std::vector<tensor::TensorSpec>> agreed;
  for (const auto& [name, ds] : datasets_) {
    auto bound = pipeline.Bind(InputSchema(ds->manifest()));
    if (!bound.ok()) continue;
    const std::vector<tensor::TensorSpec>& outputs = (*bound)->outputs();
    const auto same = [](const std::vector<tensor::TensorSpec>& a,
                         const std::vector<tensor::TensorSpec>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                        [](const auto& x, const auto& y) {
                          return x.name == y.name && x.dtype == y.dtype &&
                                 x.shape == y.shape &&
                                 x.offsets_for == y.offsets_for &&
                                 x.utf8 == y.utf8;
                        });
    };
    if (agreed.has_value() && !same(*agreed, outputs)) return {};
    agreed = outputs;
  }
  return agreed.value_or(std::vector<tensor::TensorSpec>{});
}

std::vector<pipeline::InputField> InputSchema(const dataset::Manifest& m) {
  using Passthrough = pipeline::InputField::Passthrough;
  std::vector<pipeline::InputField> schema;
  for (const dataset::FieldSpec& f : m.fields) {
    pipeline::InputField field;
    field.name = f.name;
    switch (f.kind->passthrough(f)) {
      case dataset::FieldKind::Passthrough::kDense:
        field.passthrough = Passthrough::kDense;
        break;
      case dataset::FieldKind::Passthrough::kRaggedRows:
        field.passthrough = Passthrough::kRaggedRows;
        break;
      case dataset::FieldKind::Passthrough::kRaggedBytes:
        field.passthrough = Passthrough::kRaggedBytes;
        break;
    }
    field.spatial = f.kind->spatial();
    field.dtype = f.dtype;
    field.shape = f.shape;
    field.max_length = f.max_length;
    field.utf8 = f.kind->name() == "str";
    schema.push_back(std::move(field));
  }
  return schema;
}

}  // namespace stoker::service
