#include "server/pipeline/pipeline_definition.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace stoker::pipeline {
namespace {

// Doubles with every digit, so that two values that differ never print
// alike; strings quoted, so that no value can imitate a separator.
struct ValueText {
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(int64_t i) const { return absl::StrCat(i); }
  std::string operator()(double d) const { return absl::StrFormat("%.17g", d); }
  std::string operator()(const std::string& s) const {
    return absl::StrFormat("%ds\"%s\"", s.size(), s);
  }
  std::string operator()(const std::vector<double>& v) const {
    return absl::StrCat("[",
                        absl::StrJoin(v, ",",
                                      [&](std::string* out, double d) {
                                        out->append((*this)(d));
                                      }),
                        "]");
  }
  std::string operator()(const std::vector<std::string>& v) const {
    return absl::StrCat(
        "[",
        absl::StrJoin(v, ",",
                      [&](std::string* out, const std::string& s) {
                        out->append((*this)(s));
                      }),
        "]");
  }
};

void AppendOps(const std::vector<OpConfig>& ops, std::string* out) {
  for (const OpConfig& op : ops) {
    absl::StrAppend(out, op.name, "{");
    bool first = true;
    for (const auto& [key, value] : op.args) {  // A std::map: sorted keys.
      absl::StrAppend(out, first ? "" : ",", key, "=",
                      std::visit(ValueText{}, value));
      first = false;
    }
    absl::StrAppend(out, "} ");
  }
}

}  // namespace

std::string PipelineDefinition(const PipelineConfig& config,
                               int64_t max_decode_pixels) {
  std::string out;
  AppendOps(config.ops, &out);
  for (const ViewConfig& view : config.views) {
    absl::StrAppend(&out, "view ", view.name, " x", view.count, ": ");
    AppendOps(view.ops, &out);
  }
  absl::StrAppend(&out, "| max_decode_pixels=", max_decode_pixels);
  return out;
}

}  // namespace stoker::pipeline
