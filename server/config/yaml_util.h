// Helpers the config loader uses to read a YAML tree strictly and to report
// every mistake as "FILE:LINE:COL: what was wrong; what was expected".
//
// Internal to server/config/. Nothing here throws: yaml-cpp is only used
// through calls that cannot throw on a tree that has already been parsed
// (type queries, iteration, Scalar(), Mark()).
//
// Thread-safety: Diagnostics is not thread-safe (one per load); the free
// functions are pure.

#ifndef STOKER_SERVER_CONFIG_YAML_UTIL_H_
#define STOKER_SERVER_CONFIG_YAML_UTIL_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stoker::config::internal {

// Collects the errors of one load, each prefixed with its location, so that
// a user sees all of them at once rather than one per run.
class Diagnostics {
 public:
  // `source` names the config in messages, usually the file path as given.
  explicit Diagnostics(std::string source);

  // Records "SOURCE:LINE:COL: message". yaml-cpp's marks are 0-based; the
  // message shows them 1-based. A null mark (from an empty document) shows
  // as 1:1.
  void Error(const YAML::Mark& mark, absl::string_view message);

  // "SOURCE:LINE:COL" for `mark`, as Error writes it.
  std::string Where(const YAML::Mark& mark) const;

  bool ok() const { return messages_.empty(); }

  // Errors recorded so far, listed or not; compare before and after a step
  // to learn whether that step found any.
  size_t error_count() const { return messages_.size() + dropped_; }

  // OkStatus if there were no errors; otherwise InvalidArgument with the
  // messages one per line in the order they were found.
  absl::Status ToStatus() const;

 private:
  // Past this many errors the rest are counted, not listed: one early
  // mistake (a bad indent) can cause many follow-on ones.
  static constexpr size_t kMaxListed = 20;

  const std::string source_;
  std::vector<std::string> messages_;
  size_t dropped_ = 0;
};

// One key/value pair of a YAML map, key already known to be a scalar.
struct MapEntry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
  // Where to point at the value. For an empty value ("key:" with nothing
  // after it) yaml-cpp marks the next token, often on the next line, so this
  // is the key's mark instead.
  YAML::Mark value_mark;
};

// Reads the entries of `map` in document order. Reports (and drops) keys that
// are not scalars and keys seen before in the same map (yaml-cpp keeps both
// and lookups silently use the first). `section` names the map in messages
// ("limits", "dataset 'train'"; empty for the top level).
// REQUIRES: map.IsMap().
std::vector<MapEntry> ReadMap(const YAML::Node& map, absl::string_view section,
                              Diagnostics& diag);

// As above, and also reports (and drops) keys not in `allowed`, suggesting
// the closest allowed key. An empty `allowed` admits no key at all.
std::vector<MapEntry> ReadMap(const YAML::Node& map, absl::string_view section,
                              const std::vector<std::string>& allowed,
                              Diagnostics& diag);

// The mark to report for `node`, falling back to `fallback` where the node
// has none (a null node) or its mark would point past it.
YAML::Mark MarkOf(const YAML::Node& node, const YAML::Mark& fallback);

// Describes a node for the "got ..." part of a message: 'text' for a scalar
// (quoted, shortened if long), "a list", "a map" or "nothing".
std::string Describe(const YAML::Node& node);

// Scalar parsers. They return nullopt on anything that is not exactly the
// expected form; the caller reports it with its location.
// true|false|yes|no|on|off, case-insensitive.
std::optional<bool> ParseBool(absl::string_view text);
// A decimal integer that fits in int64.
std::optional<int64_t> ParseInt(absl::string_view text);
// A finite decimal number (integers included, exponents allowed).
std::optional<double> ParseNumber(absl::string_view text);

// Edit distance between two short strings, counting an insertion, a
// deletion, a substitution or a swap of two adjacent characters as one.
size_t EditDistance(absl::string_view a, absl::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo
// (at most a quarter of the word's length away, at least 1, at most 3);
// nullopt otherwise.
std::optional<std::string> ClosestMatch(
    absl::string_view word, const std::vector<std::string>& candidates);

// "unknown KIND 'word' in SECTION (did you mean 'x'?); expected one of: a,
// b, c" — the message for a name that is not in `known`. With `known` empty
// it ends "; expected no KINDs".
std::string UnknownNameMessage(absl::string_view kind, absl::string_view word,
                               absl::string_view section,
                               const std::vector<std::string>& known);

// Where each YAML document of `text` starts. Not YAML::LoadAll: on some
// inputs (a lone "," at the top level, found by tests/fuzz) yaml-cpp 0.7's
// parser yields empty documents at the same place forever, and LoadAll
// allocates until the process dies. Here a document that starts where the
// one before it did is an error. Throws YAML::Exception.
std::vector<YAML::Mark> FindDocuments(const std::string& text);

}  // namespace stoker::config::internal

#endif  // STOKER_SERVER_CONFIG_YAML_UTIL_H_
