#include "server/config/flag_config.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stoker::config {
namespace {

constexpr char kDefaultListen[] = "unix:/run/stoker/stoker.sock";

// NAME and VALUE of "NAME=VALUE"; InvalidArgument naming `flag` otherwise.
// With `name_optional`, "VALUE" alone is VALUE=VALUE.
absl::StatusOr<std::pair<std::string, std::string>> Split(
    const std::string& text, const char* flag, const char* example,
    bool name_optional) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos && name_optional && !text.empty()) {
    return std::make_pair(text, text);
  }
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "': expected NAME=VALUE, like ", flag, " ",
        example));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

}  // namespace

absl::StatusOr<std::string> ConfigFromFlags(const ConfigFlags& flags) {
  if (flags.datasets.empty() || flags.pipelines.empty()) {
    return absl::InvalidArgumentError(
        "without --config, give at least one --dataset NAME=PATH and one "
        "--pipeline NAME=PRESET (stokerd --help-config lists the presets)");
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  const std::string listen =
      flags.listen.empty() ? kDefaultListen : flags.listen;
  out << YAML::Key << "listen" << YAML::Value << YAML::BeginMap;
  if (absl::StartsWith(listen, "unix:")) {
    out << YAML::Key << "unix" << YAML::Value
        << std::string(absl::StripPrefix(listen, "unix:"));
  } else {
    out << YAML::Key << "tcp" << YAML::Value << listen;
  }
  out << YAML::EndMap;
  out << YAML::Key << "workers" << YAML::Value << "auto";
  out << YAML::Key << "prefetch" << YAML::Value << "auto";
  out << YAML::Key << "datasets" << YAML::Value << YAML::BeginMap;
  for (const std::string& flag : flags.datasets) {
    auto parsed = Split(flag, "--dataset", "train=/data/train", false);
    if (!parsed.ok()) return parsed.status();
    out << YAML::Key << parsed->first << YAML::Value << YAML::BeginMap
        << YAML::Key << "path" << YAML::Value << parsed->second
        << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::Key << "pipelines" << YAML::Value << YAML::BeginMap;
  for (const std::string& flag : flags.pipelines) {
    auto parsed = Split(flag, "--pipeline", "train=imagenet_train", true);
    if (!parsed.ok()) return parsed.status();
    out << YAML::Key << parsed->first << YAML::Value << YAML::BeginMap
        << YAML::Key << "preset" << YAML::Value << parsed->second
        << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace stoker::config
