#include "server/dataset/part_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::dataset {

void RangeSet::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // The first run that ends at or after `begin` may touch the new one.
  auto it = runs_.upper_bound(begin);
  if (it != runs_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) it = prev;
  }
  while (it != runs_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = runs_.erase(it);
  }
  runs_.emplace(begin, end);
}

bool RangeSet::Contains(uint64_t begin, uint64_t end) const {
  if (begin >= end) return true;
  auto it = runs_.upper_bound(begin);
  if (it == runs_.begin()) return false;
  --it;
  return it->first <= begin && it->second >= end;
}

std::vector<RangeSet::Range> RangeSet::Missing(uint64_t begin, uint64_t end,
                                               uint64_t min_kept) const {
  std::vector<Range> gaps;
  uint64_t at = begin;
  auto it = runs_.upper_bound(begin);
  if (it != runs_.begin() && std::prev(it)->second > begin) --it;
  for (; at < end && it != runs_.end() && it->first < end; ++it) {
    if (it->first > at) gaps.emplace_back(at, it->first);
    at = std::max(at, it->second);
  }
  if (at < end) gaps.emplace_back(at, end);
  std::vector<Range> out;
  for (const Range& g : gaps) {
    if (!out.empty() && g.first - out.back().second < min_kept) {
      out.back().second = g.second;
    } else {
      out.push_back(g);
    }
  }
  return out;
}

uint64_t RangeSet::bytes() const {
  uint64_t n = 0;
  for (const auto& [b, e] : runs_) n += e - b;
  return n;
}

uint64_t RangeSet::bytes(uint64_t begin, uint64_t end) const {
  uint64_t n = 0;
  auto it = runs_.upper_bound(begin);
  if (it != runs_.begin()) --it;
  for (; it != runs_.end() && it->first < end; ++it) {
    const uint64_t b = std::max(begin, it->first);
    const uint64_t e = std::min(end, it->second);
    if (b < e) n += e - b;
  }
  return n;
}

PartFiles::~PartFiles() { CloseAll(); }

absl::Status PartFiles::Open(const std::string& file, const std::string& path,
                             RangeSet present) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  absl::MutexLock lock(&mu_);
  DrainLocked(file);
  Part& part = parts_[file];
  CloseLocked(part);
  part = Part();
  part.fd = fd;
  part.present = std::move(present);
  return absl::OkStatus();
}

void PartFiles::CloseLocked(Part& part) {
  if (part.fd < 0) return;
  // Bytes written here are part of the file the copy checks and publishes:
  // durable before it is renamed, as the copy's own chunks are.
  ::fdatasync(part.fd);
  ::close(part.fd);
  part.fd = -1;
}

void PartFiles::DrainLocked(const std::string& file) {
  auto it = parts_.find(file);
  if (it == parts_.end()) return;
  it->second.closing = true;
  released_.SignalAll();
  while ((it = parts_.find(file)) != parts_.end() && it->second.waiters > 0) {
    released_.Wait(&mu_);
  }
}

PartFiles::Part& PartFiles::AwaitLocked(
    const std::string& file,
    absl::FunctionRef<bool(const Part&)> keep_waiting) {
  auto it = parts_.find(file);
  ++it->second.waiters;
  while (!it->second.closing && keep_waiting(it->second)) {
    released_.Wait(&mu_);
    it = parts_.find(file);  // Still there: Close waits for the waiters.
  }
  Part& part = it->second;
  if (--part.waiters == 0 && part.closing) released_.SignalAll();
  return part;
}

void PartFiles::Close(const std::string& file) {
  absl::MutexLock lock(&mu_);
  DrainLocked(file);
  auto it = parts_.find(file);
  if (it == parts_.end()) return;
  CloseLocked(it->second);
  parts_.erase(it);
}

void PartFiles::CloseAll() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> files;
  for (const auto& [file, part] : parts_) files.push_back(file);
  for (const std::string& file : files) DrainLocked(file);
  for (auto& [file, part] : parts_) CloseLocked(part);
  parts_.clear();
}

std::vector<RangeSet::Range> PartFiles::Missing(const std::string& file,
                                                uint64_t offset,
                                                uint64_t length,
                                                uint64_t min_kept) const {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end()) {
    if (length == 0) return {};
    return {{offset, offset + length}};
  }
  return it->second.present.Missing(offset, offset + length, min_kept);
}

void PartFiles::MarkPresent(const std::string& file, uint64_t offset,
                            uint64_t length) {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end()) return;
  it->second.present.Add(offset, offset + length);
}

std::vector<RangeSet::Range> PartFiles::Claim(const std::string& file,
                                              uint64_t offset, uint64_t length,
                                              uint64_t min_kept) {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end()) {
    if (length == 0) return {};
    return {{offset, offset + length}};
  }
  // The copy's pieces never overlap each other: a claim over these bytes
  // is a read's block in flight.
  Part& part = AwaitLocked(file, [&](const Part& p) {
    return ClaimedLocked(p, offset, offset + length) > 0;
  });
  std::vector<RangeSet::Range> ranges =
      part.present.Missing(offset, offset + length, min_kept);
  for (const RangeSet::Range& r : ranges) part.claimed.push_back(r);
  return ranges;
}

std::optional<std::vector<RangeSet::Range>> PartFiles::ClaimFree(
    const std::string& file, uint64_t offset, uint64_t length) {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end() || it->second.closing) return std::nullopt;
  Part& part = it->second;
  std::vector<RangeSet::Range> free =
      part.present.Missing(offset, offset + length, 0);
  for (const RangeSet::Range& c : part.claimed) {
    std::vector<RangeSet::Range> rest;
    for (const RangeSet::Range& f : free) {
      if (c.second <= f.first || f.second <= c.first) {
        rest.push_back(f);
        continue;
      }
      if (f.first < c.first) rest.emplace_back(f.first, c.first);
      if (c.second < f.second) rest.emplace_back(c.second, f.second);
    }
    free.swap(rest);
  }
  for (const RangeSet::Range& r : free) part.claimed.push_back(r);
  return free;
}

void PartFiles::Release(const std::string& file,
                        const std::vector<RangeSet::Range>& ranges,
                        bool written) {
  absl::MutexLock lock(&mu_);
  released_.SignalAll();
  auto it = parts_.find(file);
  if (it == parts_.end()) return;
  Part& part = it->second;
  for (const RangeSet::Range& r : ranges) {
    auto c = std::find(part.claimed.begin(), part.claimed.end(), r);
    if (c != part.claimed.end()) part.claimed.erase(c);
    if (written) part.present.Add(r.first, r.second);
  }
}

uint64_t PartFiles::ClaimedLocked(const Part& part, uint64_t begin,
                                  uint64_t end) {
  uint64_t largest = 0;
  for (const RangeSet::Range& r : part.claimed) {
    if (r.first < end && begin < r.second) {
      largest = std::max(largest, r.second - r.first);
    }
  }
  return largest;
}

bool PartFiles::Write(const std::string& file, uint64_t offset,
                      std::string_view bytes) {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end() || it->second.closing || bytes.empty()) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(it->second.fd, bytes.data() + done,
                               bytes.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  // What was written is present even if the write stopped short.
  it->second.present.Add(offset, offset + done);
  return done == bytes.size();
}

std::optional<std::string> PartFiles::Read(const std::string& file,
                                           uint64_t offset, uint64_t length,
                                           uint64_t wait_for) {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  if (it == parts_.end() || length == 0) return std::nullopt;
  // While this read waits, Close() waits for it: the copy closes a part
  // file right after its last piece, and a read woken by that piece must
  // still find the bytes here rather than fetch them again.
  Part& part = AwaitLocked(file, [&](const Part& p) {
    if (p.present.Contains(offset, offset + length)) return false;
    const uint64_t claim = ClaimedLocked(p, offset, offset + length);
    return claim > 0 && claim <= wait_for;
  });
  if (part.fd < 0 || !part.present.Contains(offset, offset + length)) {
    return std::nullopt;
  }
  std::string out(length, '\0');
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(part.fd, out.data() + done, length - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    done += static_cast<size_t>(n);
  }
  return out;
}

int PartFiles::Waiting(const std::string& file) const {
  absl::MutexLock lock(&mu_);
  auto it = parts_.find(file);
  return it == parts_.end() ? 0 : it->second.waiters;
}

}  // namespace stoker::dataset
