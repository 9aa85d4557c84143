#include "server/config/presets.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

#ifndef STOKER_INSTALL_PRESETS
#error "STOKER_INSTALL_PRESETS is set by server/config/CMakeLists.txt"
#endif
#ifndef STOKER_SOURCE_PRESETS
#error "STOKER_SOURCE_PRESETS is set by server/config/CMakeLists.txt"
#endif

namespace stoker::config {
namespace {

namespace fs = std::filesystem;

constexpr char kSuffix[] = ".yaml";

bool IsDirectory(const std::string& path) {
  std::error_code error;
  return !path.empty() && fs::is_directory(path, error);
}

// ../share/stoker/presets beside the running binary, or empty.
std::string BesideBinary() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) return "";
  return (exe.parent_path().parent_path() / "share" / "stoker" / "presets")
      .lexically_normal()
      .string();
}

bool IsPlainName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '-' || c == '.';
  });
}

}  // namespace

absl::StatusOr<std::string> FindPresetsDir(const std::string& given) {
  if (!given.empty()) {
    if (IsDirectory(given)) return given;
    return absl::NotFoundError(absl::StrCat(
        "presets folder '", given, "' (--presets) is not a directory"));
  }
  const char* env = std::getenv("STOKER_PRESETS");
  if (env != nullptr && *env != '\0') {
    if (IsDirectory(env)) return std::string(env);
    return absl::NotFoundError(absl::StrCat(
        "presets folder '", env, "' ($STOKER_PRESETS) is not a directory"));
  }
  const std::vector<std::string> places = {
      BesideBinary(), STOKER_INSTALL_PRESETS, STOKER_SOURCE_PRESETS};
  for (const std::string& place : places) {
    if (IsDirectory(place)) return place;
  }
  return absl::NotFoundError(absl::StrCat(
      "no pipeline presets folder: tried ", absl::StrJoin(places, ", "),
      "; install stoker (cmake --install) or pass --presets DIR or set "
      "$STOKER_PRESETS to the source tree's config/presets"));
}

std::vector<std::string> ListPresets(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string file = it->path().filename().string();
    if (!absl::EndsWith(file, kSuffix) || !it->is_regular_file(error)) {
      continue;
    }
    names.push_back(std::string(absl::StripSuffix(file, kSuffix)));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> PresetPath(const std::string& dir,
                                       const std::string& name) {
  if (!IsPlainName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preset '", name,
        "' is not a preset name; expected a name like imagenet_train"));
  }
  const std::string path = (fs::path(dir) / (name + kSuffix)).string();
  std::error_code error;
  if (fs::is_regular_file(path, error)) return path;
  return absl::NotFoundError(
      absl::StrCat("unknown preset '", name, "' (no ", path,
                   "); expected one of: ",
                   absl::StrJoin(ListPresets(dir), ", ")));
}

std::string PresetReference(const std::string& dir) {
  std::string out = absl::StrCat(
      "## Pipeline presets\n\nFrom ", dir,
      "; use one as `pipelines: {NAME: {preset: PRESET}}` or "
      "`stokerd --pipeline NAME=PRESET`.\n\n| preset | what it is |\n"
      "|---|---|\n");
  for (const std::string& name : ListPresets(dir)) {
    std::ifstream in(fs::path(dir) / (name + kSuffix));
    std::string line;
    std::string text;
    // The leading comment's lines, without "NAME: " at its start.
    while (std::getline(in, line) && absl::StartsWith(line, "#")) {
      absl::string_view words = absl::StripAsciiWhitespace(
          absl::StripPrefix(absl::string_view(line), "#"));
      if (words.empty()) break;
      if (text.empty()) words = absl::StripPrefix(words, name + ": ");
      absl::StrAppend(&text, text.empty() ? "" : " ", words);
    }
    absl::StrAppend(&out, "| `", name, "` | ", text, " |\n");
  }
  return out;
}

}  // namespace stoker::config
