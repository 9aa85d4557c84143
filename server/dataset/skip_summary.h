// A short account of many bad samples: how many failed for each reason,
// with a few of them named. Reasons that differ only in their numbers
// ("truncated at byte 11", "... byte 97"; "starts 78 0A", "starts FF 00")
// count as one.
//
// Thread-safe: a pure function.
#ifndef STOKER_SERVER_DATASET_SKIP_SUMMARY_H_
#define STOKER_SERVER_DATASET_SKIP_SUMMARY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "server/dataset/source_list.h"

namespace stoker::dataset {

// One line per reason, most frequent first, each with up to `examples`
// samples and their own reasons, e.g.
//   "  3 x pickle: truncated at byte #: a.lmdb key 0 (pickle: truncated at
//    byte 11), a.lmdb key 4 (...), ... and 1 more"
// Lines are joined by '\n'; at most `reasons` lines, then one line that
// counts the rest.
std::string SummarizeSkipped(const std::vector<SkippedFile>& skipped,
                             size_t examples = 3, size_t reasons = 10);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_SKIP_SUMMARY_H_
