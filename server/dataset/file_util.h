// Small POSIX file helpers for the dataset layer. Error codes come from
// errno (NotFound, PermissionDenied, ...); messages say what failed and why
// ("cannot open: No such file or directory") but not the path, which every
// caller adds to its own context (a skipped source file is listed by path).
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_FILE_UTIL_H_
#define STOKER_SERVER_DATASET_FILE_UTIL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace stoker::dataset {

// Replaces `*out` with the whole content of `path`.
absl::Status ReadFileToString(const std::string& path, std::string* out);

// Creates or truncates `path`, writes `data` and fsyncs it.
absl::Status WriteFileDurably(const std::string& path, std::string_view data);

// Fsyncs the directory `dir`, so that entries created or renamed in it last.
absl::Status SyncDir(const std::string& dir);

// Whether `s` is well-formed UTF-8 (what a JSON string can hold).
bool IsUtf8(std::string_view s);

// The length of the longest well-formed UTF-8 prefix of `s`: s.size() when
// IsUtf8(s), else the offset of the first byte that breaks it.
size_t Utf8PrefixLength(std::string_view s);

// `s` with every byte that is not part of well-formed UTF-8 written as
// \xHH, for messages: "caf\xe9".
std::string EscapeNonUtf8(std::string_view s);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_FILE_UTIL_H_
