// Catalog: the datasets and pipelines the daemon serves, by name.
//
// Immutable after construction and so thread-safe. A reload builds a new
// catalog and swaps it in; streams keep the catalog they opened with alive
// (shared_ptr) so a reload never pulls a dataset from under a running stream.
// Datasets and pipelines are shared between catalogs: a dataset staged from
// a `source` is opened once, when it becomes servable, and each catalog
// built after that (WithDataset, a reload) holds the same object.
#ifndef STOKER_SERVER_SERVICE_CATALOG_H_
#define STOKER_SERVER_SERVICE_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/tensor/tensor_spec.h"

namespace stoker::service {

class Catalog {
 public:
  using DatasetMap =
      std::map<std::string, std::shared_ptr<const dataset::Dataset>>;
  using PipelineMap =
      std::map<std::string, std::shared_ptr<const pipeline::Pipeline>>;

  Catalog(std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets,
          std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines);
  Catalog(DatasetMap datasets, PipelineMap pipelines);

  // This catalog with `dataset` added as `name` (or replacing it).
  std::shared_ptr<const Catalog> WithDataset(
      const std::string& name,
      std::shared_ptr<const dataset::Dataset> dataset) const;
  // This catalog without `name`.
  std::shared_ptr<const Catalog> WithoutDataset(const std::string& name) const;

  // NotFound naming the dataset and the ones that exist.
  absl::StatusOr<const dataset::Dataset*> FindDataset(
      const std::string& name) const;
  absl::StatusOr<const pipeline::Pipeline*> FindPipeline(
      const std::string& name) const;

  const DatasetMap& datasets() const { return datasets_; }
  const PipelineMap& pipelines() const { return pipelines_; }

  // The per-sample outputs of `pipeline` on the datasets it can run on, if
  // it runs on at least one and they all agree; else empty (the outputs
  // then depend on the dataset, and a stream's header says them).
  std::vector<tensor::TensorSpec> OutputsOf(
      const pipeline::Pipeline& pipeline) const;

 private:
  const DatasetMap datasets_;
  const PipelineMap pipelines_;
};

// The schema of a dataset as the pipeline layer sees it.
std::vector<pipeline::InputField> InputSchema(const dataset::Manifest& m);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_CATALOG_H_
