// Helpers for the config tests: a scratch directory and a way to get the
// message of a load that must fail. Thread-safety: TempDir is not shared.

#ifndef STOKER_TESTS_CONFIG_CONFIG_TEST_UTIL_H_
#define STOKER_TESTS_CONFIG_CONFIG_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/config/options.h"

namespace stoker::config::testing {

// A fresh directory under the test's temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/stoker_config_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    }
    path_ = std::filesystem::path(pattern).lexically_normal();
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Creates `relative` (and its parents) as a directory; returns its path.
  std::filesystem::path MakeDir(const std::string& relative) const {
    const std::filesystem::path dir = path_ / relative;
    std::filesystem::create_directories(dir);
    return dir;
  }

  // Writes `text` to `relative`; returns its path.
  std::filesystem::path WriteFile(const std::string& relative,
                                  const std::string& text) const {
    const std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

// The message of a failed load, or a test failure if it loaded.
inline std::string ErrorOf(const absl::StatusOr<ServerOptions>& result) {
  if (result.ok()) {
    ADD_FAILURE() << "config loaded but an error was expected";
    return "";
  }
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  return std::string(result.status().message());
}

// For configs that must fail: Error(yaml) loads `yaml` as "stoker.yaml",
// with $D replaced by an existing dataset directory, and returns the error.
// Lines in the tests count from the line after R"( because every literal
// starts with a newline.
class ConfigErrorTest : public ::testing::Test {
 protected:
  ConfigErrorTest() { dir_.MakeDir("d"); }

  std::string Error(absl::string_view yaml) {
    const std::string text =
        absl::StrReplaceAll(yaml, {{"$D", (dir_.path() / "d").string()}});
    return ErrorOf(LoadConfigString(text, "stoker.yaml"));
  }

  TempDir dir_;
};

}  // namespace stoker::config::testing

#endif  // STOKER_TESTS_CONFIG_CONFIG_TEST_UTIL_H_
