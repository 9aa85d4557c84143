// BuildCatalog (server_lib.h): the catalog a config names.
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/server_lib.h"

namespace stoker {

absl::StatusOr<std::shared_ptr<const service::Catalog>> BuildCatalog(
    const config::ServerOptions& options,
    const std::map<std::string, std::shared_ptr<const dataset::Dataset>>&
        staged) {
  service::Catalog::DatasetMap datasets;
  for (const config::DatasetOptions& d : options.datasets) {
    if (!d.source.empty()) {
      if (auto it = staged.find(d.name); it != staged.end()) {
        datasets[d.name] = it->second;
      }
      continue;
    }
    auto ds = dataset::Dataset::Open(d.name, d.path);
    if (!ds.ok()) {
      return absl::Status(ds.status().code(),
                          absl::StrCat(options.source, ":", d.line,
                                       ": dataset '", d.name, "' at ", d.path,
                                       ": ", ds.status().message()));
    }
    datasets[d.name] = *std::move(ds);
  }
  service::Catalog::PipelineMap pipelines;
  for (const config::PipelineOptions& p : options.pipelines) {
    auto pipe = pipeline::Pipeline::Create(
        p.name, pipeline::PipelineConfig{p.ops, p.views},
        static_cast<int64_t>(options.limits.max_decode_pixels));
    if (!pipe.ok()) {
      return absl::Status(pipe.status().code(),
                          absl::StrCat(options.source, ":", p.line,
                                       ": pipeline '", p.name,
                                       "': ", pipe.status().message()));
    }
    pipelines[p.name] = *std::move(pipe);
  }
  return std::make_shared<const service::Catalog>(std::move(datasets),
                                                  std::move(pipelines));
}

}  // namespace stoker
