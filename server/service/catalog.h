// Catalog: the datasets and pipelines the daemon serves, by name.
//
// Immutable after construction and so thread-safe. A reload builds a new
// catalog and swaps it in; streams keep the catalog they opened with alive
// (shared_ptr) so a reload never pulls a dataset from under a running stream.
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
  Catalog(std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets,
          std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines);

  // NotFound naming the dataset and the ones that exist.
  absl::StatusOr<const dataset::Dataset*> FindDataset(
      const std::string& name) const;
  absl::StatusOr<const pipeline::Pipeline*> FindPipeline(
      const std::string& name) const;

  const std::map<std::string, std::unique_ptr<dataset::Dataset>>& datasets()
      const {
    return datasets_;
  }
  const std::map<std::string, std::unique_ptr<pipeline::Pipeline>>& pipelines()
      const {
    return pipelines_;
  }

  // The per-sample outputs of `pipeline` on the datasets it can run on, if
  // it runs on at least one and they all agree; else empty (the outputs
  // then depend on the dataset, and a stream's header says them).
  std::vector<tensor::TensorSpec> OutputsOf(
      const pipeline::Pipeline& pipeline) const;

 private:
  const std::map<std::string, std::unique_ptr<dataset::Dataset>> datasets_;
  const std::map<std::string, std::unique_ptr<pipeline::Pipeline>> pipelines_;
};

// The schema of a dataset as the pipeline layer sees it.
std::vector<pipeline::InputField> InputSchema(const dataset::Manifest& m);

}  // namespace stoker::service

#endif  // STOKER_SERVER_SERVICE_CATALOG_H_
