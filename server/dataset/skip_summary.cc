#include "server/dataset/skip_summary.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::dataset {
namespace {

// `reason` with every number as '#': the key reasons group by. A number is
// a word (a run of letters, digits and '_') of hex digits with at least
// one decimal digit, or a byte as two upper-case hex digits: "11", "0A",
// "FF", but not "int32" or "cafe".
std::string Shape(const std::string& reason) {
  auto word_char = [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  std::string out;
  size_t i = 0;
  while (i < reason.size()) {
    if (!word_char(reason[i])) {
      out += reason[i++];
      continue;
    }
    size_t end = i;
    bool digit = false, hex = true, upper = true;
    for (; end < reason.size() && word_char(reason[end]); ++end) {
      const auto c = static_cast<unsigned char>(reason[end]);
      digit |= absl::ascii_isdigit(c) != 0;
      hex &= absl::ascii_isxdigit(c) != 0;
      upper &= absl::ascii_islower(c) == 0;
    }
    if (hex && (digit || (end - i == 2 && upper))) {
      out += '#';
    } else {
      out.append(reason, i, end - i);
    }
    i = end;
  }
  return out;
}

}  // namespace

std::string SummarizeSkipped(const std::vector<SkippedFile>& skipped,
                             size_t examples, size_t reasons) {
  struct Group {
    std::string shape;
    std::vector<const SkippedFile*> members;  // In the order given.
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> index;  // Shape to its group.
  for (const SkippedFile& f : skipped) {
    const std::string shape = Shape(f.reason);
    auto [it, added] = index.emplace(shape, groups.size());
    if (added) groups.push_back({shape, {}});
    groups[it->second].members.push_back(&f);
  }
  // Most frequent first; ties keep the order of their first sample.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) {
                     return a.members.size() > b.members.size();
                   });
  std::vector<std::string> lines;
  for (size_t g = 0; g < groups.size() && g < reasons; ++g) {
    const Group& group = groups[g];
    std::vector<std::string> named;
    for (size_t i = 0; i < group.members.size() && i < examples; ++i) {
      const SkippedFile& f = *group.members[i];
      // A reason with numbers is shown whole for each sample it names.
      named.push_back(f.reason == group.shape
                          ? f.path
                          : absl::StrCat(f.path, " (", f.reason, ")"));
    }
    std::string line =
        absl::StrCat("  ", group.members.size(), " x ", group.shape, ": ",
                     absl::StrJoin(named, ", "));
    if (group.members.size() > named.size()) {
      absl::StrAppend(&line, ", ... and ", group.members.size() - named.size(),
                      " more");
    }
    lines.push_back(std::move(line));
  }
  if (groups.size() > reasons) {
    size_t rest = 0;
    for (size_t g = reasons; g < groups.size(); ++g) {
      rest += groups[g].members.size();
    }
    lines.push_back(absl::StrCat("  ", rest, " more for ",
                                 groups.size() - reasons, " other reasons"));
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace stoker::dataset
