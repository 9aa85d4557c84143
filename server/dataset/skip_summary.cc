#include "server/dataset/skip_summary.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker::dataset {
namespace {

// `reason` with every run of digits as '#': the key reasons group by.
std::string Shape(const std::string& reason) {
  std::string out;
  for (size_t i = 0; i < reason.size(); ++i) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(reason[i]))) {
      while (i + 1 < reason.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(reason[i + 1]))) {
        ++i;
      }
      out += '#';
    } else {
      out += reason[i];
    }
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
