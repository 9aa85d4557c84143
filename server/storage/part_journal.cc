#include "server/storage/part_journal.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "server/dataset/file_util.h"

namespace stoker::storage {
namespace {

constexpr char kMagic[] = "stoker-part-ranges";
constexpr char kVersion[] = "1";

std::string Hex64(std::string_view text) {
  return absl::StrFormat("%016x", XXH3_64bits(text.data(), text.size()));
}

std::string Check(uint64_t begin, uint64_t end, const std::string& key) {
  return Hex64(absl::StrCat(begin, " ", end, " ", key));
}

std::string Line(uint64_t begin, uint64_t end, const std::string& key) {
  return absl::StrCat(begin, " ", end, " ", Check(begin, end, key), "\n");
}

std::string HeaderOf(uint64_t size, const std::string& key) {
  return absl::StrCat(kMagic, " ", kVersion, " ", size, " ", key, "\n");
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ErrnoToStatus(n < 0 ? errno : ENOSPC,
                                 absl::StrCat("cannot write ", path));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string PartJournal::PathOf(const std::string& part) {
  return absl::StrCat(part, ".ranges");
}

std::string PartJournal::KeyOf(const std::string& digest,
                               const std::string& manifest_text) {
  // Hashed, so that the key is one word whatever the manifest holds.
  if (!digest.empty()) return absl::StrCat("digest:", Hex64(digest));
  return absl::StrCat("manifest:", Hex64(manifest_text));
}

absl::StatusOr<dataset::RangeSet> PartJournal::Load(const std::string& path,
                                                    uint64_t size,
                                                    const std::string& key) {
  std::string text;
  if (absl::Status s = dataset::ReadFileToString(path, &text); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  if (text.empty() || text.back() != '\n') {
    return absl::DataLossError(
        absl::StrCat(path, ": torn (its last line is not whole)"));
  }
  text.pop_back();
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const std::vector<absl::string_view> head = absl::StrSplit(lines[0], ' ');
  uint64_t head_size = 0;
  if (head.size() != 4 || head[0] != kMagic || head[1] != kVersion ||
      !absl::SimpleAtoi(head[2], &head_size)) {
    return absl::DataLossError(absl::StrCat(path, ": not a range journal"));
  }
  if (head_size != size || head[3] != key) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": written for another version of the file (", head_size,
        " bytes, key ", head[3], "; now ", size, " bytes, key ", key, ")"));
  }
  dataset::RangeSet ranges;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    uint64_t begin = 0;
    uint64_t end = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &begin) ||
        !absl::SimpleAtoi(f[1], &end) || f[2] != Check(begin, end, key)) {
      return absl::DataLossError(
          absl::StrCat(path, ": torn (line ", i + 1, " does not parse)"));
    }
    if (begin >= end || end > size) {
      return absl::DataLossError(absl::StrCat(path, ": names bytes ", begin,
                                              "-", end, " of a file of ", size,
                                              " bytes"));
    }
    ranges.Add(begin, end);
  }
  return ranges;
}

absl::StatusOr<std::unique_ptr<PartJournal>> PartJournal::Create(
    const std::string& path, uint64_t size, const std::string& key) {
  const int fd = ::open(
      path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  }
  std::unique_ptr<PartJournal> j(new PartJournal(fd, path, size, key));
  if (absl::Status s = WriteAll(fd, j->Header(), path); !s.ok()) return s;
  return j;
}

absl::StatusOr<std::unique_ptr<PartJournal>> PartJournal::Reopen(
    const std::string& path, uint64_t size, const std::string& key) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  return std::unique_ptr<PartJournal>(new PartJournal(fd, path, size, key));
}

PartJournal::PartJournal(int fd, std::string path, uint64_t size,
                         std::string key)
    : fd_(fd), path_(std::move(path)), size_(size), key_(std::move(key)) {}

PartJournal::~PartJournal() { ::close(fd_); }

std::string PartJournal::Header() const { return HeaderOf(size_, key_); }

absl::Status PartJournal::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return absl::OkStatus();
  // One write of a whole line: with O_APPEND, lines of concurrent calls do
  // not interleave.
  const std::string line = Line(begin, end, key_);
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n == static_cast<ssize_t>(line.size())) return absl::OkStatus();
  return absl::ErrnoToStatus(n < 0 ? errno : ENOSPC,
                             absl::StrCat("cannot append to ", path_));
}

absl::Status PartJournal::Reset() {
  if (::ftruncate(fd_, 0) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot truncate ", path_));
  }
  return WriteAll(fd_, Header(), path_);
}

}  // namespace stoker::storage
