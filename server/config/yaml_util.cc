#include "server/config/yaml_util.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace stoker::config::internal {

Diagnostics::Diagnostics(std::string source) : source_(std::move(source)) {}

std::string Diagnostics::Where(const YAML::Mark& mark) const {
  const int line = mark.line < 0 ? 1 : mark.line + 1;
  const int column = mark.column < 0 ? 1 : mark.column + 1;
  return absl::StrCat(source_, ":", line, ":", column);
}

void Diagnostics::Error(const YAML::Mark& mark, absl::string_view message) {
  if (messages_.size() >= kMaxListed) {
    ++dropped_;
    return;
  }
  messages_.push_back(absl::StrCat(Where(mark), ": ", message));
}

absl::Status Diagnostics::ToStatus() const {
  if (messages_.empty()) return absl::OkStatus();
  std::string text = absl::StrJoin(messages_, "\n");
  if (dropped_ > 0) {
    absl::StrAppend(&text, "\n", source_, ": ", dropped_,
                    " more errors not shown; fix the ones above first");
  }
  return absl::InvalidArgumentError(text);
}

namespace {

// ReadMap with `allowed` == nullptr admitting any key.
std::vector<MapEntry> ReadMapImpl(const YAML::Node& map,
                                  absl::string_view section,
                                  const std::vector<std::string>* allowed,
                                  Diagnostics& diag) {
  std::vector<MapEntry> entries;
  std::map<std::string, int> first_line;  // Key -> 1-based line seen first.
  const std::string in_section =
      section.empty() ? std::string() : absl::StrCat(" in ", section);
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      diag.Error(key.Mark(),
                 absl::StrCat("a key", in_section, " is ", Describe(key),
                              "; expected a plain name"));
      continue;
    }
    const std::string& name = key.Scalar();
    const auto [seen, inserted] = first_line.emplace(name, key.Mark().line + 1);
    if (!inserted) {
      diag.Error(key.Mark(),
                 absl::StrCat("duplicate key '", name, "'", in_section,
                              " (first at line ", seen->second,
                              "); expected each key once"));
      continue;
    }
    if (allowed != nullptr &&
        std::find(allowed->begin(), allowed->end(), name) == allowed->end()) {
      diag.Error(key.Mark(),
                 UnknownNameMessage("key", name, section, *allowed));
      continue;
    }
    entries.push_back(MapEntry{name, key, value, MarkOf(value, key.Mark())});
  }
  return entries;
}

// Records where each document of a YAML stream starts; ignores the rest.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;

  void OnDocumentStart(const YAML::Mark& mark) override {
    marks.push_back(mark);
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

std::vector<MapEntry> ReadMap(const YAML::Node& map, absl::string_view section,
                              Diagnostics& diag) {
  return ReadMapImpl(map, section, nullptr, diag);
}

std::vector<MapEntry> ReadMap(const YAML::Node& map, absl::string_view section,
                              const std::vector<std::string>& allowed,
                              Diagnostics& diag) {
  return ReadMapImpl(map, section, &allowed, diag);
}

YAML::Mark MarkOf(const YAML::Node& node, const YAML::Mark& fallback) {
  if (!node.IsDefined() || node.IsNull()) return fallback;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? fallback : mark;
}

std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  constexpr size_t kMaxShown = 40;
  const std::string& text = node.Scalar();
  if (text.size() <= kMaxShown) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMaxShown), "...'");
}

std::optional<bool> ParseBool(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "no" || lower == "off") return false;
  return std::nullopt;
}

std::optional<int64_t> ParseInt(absl::string_view text) {
  // SimpleAtoi tolerates surrounding spaces; a YAML scalar has none unless
  // quoted, and then they are a mistake.
  if (text.empty() || absl::ascii_isspace(text.front()) ||
      absl::ascii_isspace(text.back())) {
    return std::nullopt;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

std::optional<double> ParseNumber(absl::string_view text) {
  if (text.empty() || absl::ascii_isspace(text.front()) ||
      absl::ascii_isspace(text.back())) {
    return std::nullopt;
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  // Optimal string alignment: Levenshtein plus swaps of adjacent letters,
  // the commonest typo ("szie").
  const size_t width = b.size() + 1;
  std::vector<size_t> d((a.size() + 1) * width);
  const auto at = [&](size_t i, size_t j) -> size_t& {
    return d[i * width + j];
  };
  for (size_t i = 0; i <= a.size(); ++i) at(i, 0) = i;
  for (size_t j = 0; j <= b.size(); ++j) at(0, j) = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      at(i, j) = std::min(
          {at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
      }
    }
  }
  return at(a.size(), b.size());
}

std::optional<std::string> ClosestMatch(
    absl::string_view word, const std::vector<std::string>& candidates) {
  const size_t limit = std::clamp<size_t>(word.size() / 4, 1, 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string UnknownNameMessage(absl::string_view kind, absl::string_view word,
                               absl::string_view section,
                               const std::vector<std::string>& known) {
  std::vector<std::string> sorted = known;
  std::sort(sorted.begin(), sorted.end());
  std::string message = absl::StrCat("unknown ", kind, " '", word, "'");
  if (!section.empty()) absl::StrAppend(&message, " in ", section);
  if (std::optional<std::string> close = ClosestMatch(word, sorted)) {
    absl::StrAppend(&message, " (did you mean '", *close, "'?)");
  }
  if (sorted.empty()) {
    absl::StrAppend(&message, "; expected no ", kind, "s");
  } else {
    absl::StrAppend(&message,
                    "; expected one of: ", absl::StrJoin(sorted, ", "));
  }
  return message;
}

std::vector<YAML::Mark> FindDocuments(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  size_t handled = 0;
  while (parser.HandleNextDocument(starts)) {
    ++handled;
    const std::vector<YAML::Mark>& m = starts.marks;
    if (m.size() != handled ||
        (handled >= 2 && m[handled - 1].pos <= m[handled - 2].pos)) {
      throw YAML::ParserException(
          m.empty() ? YAML::Mark() : m.back(),
          "the parser does not advance here (a stray ',' at the top level?)");
    }
  }
  return starts.marks;
}


}  // namespace stoker::config::internal
