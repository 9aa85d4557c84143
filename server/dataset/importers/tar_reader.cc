#include "server/dataset/importers/tar_reader.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stoker::dataset {
namespace {

constexpr uint64_t kBlock = 512;
// A GNU long name or pax header larger than this is not a real archive.
constexpr uint64_t kMaxMetaBytes = 1 << 20;

// The NUL-terminated string in header bytes [at, at + len).
std::string Field(std::string_view h, size_t at, size_t len) {
  std::string_view f = h.substr(at, len);
  const size_t nul = f.find('\0');
  return std::string(nul == std::string_view::npos ? f : f.substr(0, nul));
}

// An octal number field (spaces and NULs around it), or GNU base-256 when
// the first byte's high bit is set.
bool Number(std::string_view h, size_t at, size_t len, uint64_t* out) {
  std::string_view f = h.substr(at, len);
  *out = 0;
  if (static_cast<unsigned char>(f[0]) & 0x80) {
    if (f[0] != '\x80') return false;  // Negative, or too large.
    for (size_t i = 1; i < f.size(); ++i) {
      if (*out >> 56) return false;
      *out = (*out << 8) | static_cast<unsigned char>(f[i]);
    }
    return true;
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  bool digits = false;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (*out >> 60) return false;
    *out = (*out << 3) | static_cast<uint64_t>(f[i] - '0');
    digits = true;
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') return false;
  }
  return digits;
}

bool ChecksumOk(std::string_view h) {
  uint64_t stored = 0;
  if (!Number(h, 148, 8, &stored)) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const char c = (i >= 148 && i < 156) ? ' ' : h[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return stored == unsigned_sum ||
         static_cast<int64_t>(stored) == signed_sum;
}

// Applies the records of a pax extended header ("LEN key=value\n" ...):
// `path` and `size` are what a later member takes.
absl::Status ParsePax(std::string_view data, std::string* path,
                      uint64_t* size, bool* has_size) {
  while (!data.empty()) {
    const size_t space = data.find(' ');
    uint64_t len = 0;
    if (space == std::string_view::npos ||
        !absl::SimpleAtoi(absl::string_view(data.data(), space), &len) ||
        len <= space + 1 || len > data.size() || data[len - 1] != '\n') {
      return absl::DataLossError("malformed pax record");
    }
    std::string_view record = data.substr(space + 1, len - space - 2);
    const size_t eq = record.find('=');
    if (eq == std::string_view::npos) {
      return absl::DataLossError("pax record without '='");
    }
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1);
    if (key == "path") *path = std::string(value);
    if (key == "size") {
      if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()),
                            size)) {
        return absl::DataLossError(absl::StrCat(
            "pax record size=", std::string(value),
            " is not a number of bytes"));
      }
      *has_size = true;
    }
    data.remove_prefix(len);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TarListing> ListTar(const TarRead& read,
                                   uint64_t archive_size) {
  TarListing out;
  std::string header, meta;
  std::string long_name, pax_path;  // For the next member.
  uint64_t pax_size = 0;
  bool pax_has_size = false;
  uint64_t at = 0;
  while (at + kBlock <= archive_size) {
    auto bad = [at](absl::string_view what) {
      return absl::DataLossError(
          absl::StrCat("tar header at byte ", at, ": ", what));
    };
    if (absl::Status s = read(at, kBlock, &header); !s.ok()) return s;
    if (header.find_first_not_of('\0') == std::string::npos) break;  // End.
    if (!ChecksumOk(header)) return bad("checksum mismatch (not a tar?)");
    uint64_t size = 0;
    if (!Number(header, 124, 12, &size)) return bad("bad size field");
    const char type = header[156];
    if (pax_has_size && type != 'x' && type != 'L') size = pax_size;
    const uint64_t data_at = at + kBlock;
    if (size > archive_size - data_at) {
      return bad(absl::StrCat("member of ", size,
                              " bytes runs past the end of the archive"));
    }
    const uint64_t next = data_at + (size + kBlock - 1) / kBlock * kBlock;
    if (type == 'L' || type == 'x') {
      if (size > kMaxMetaBytes) return bad("long name or pax header too big");
      if (absl::Status s = read(data_at, size, &meta); !s.ok()) return s;
      if (type == 'L') {
        long_name = Field(meta, 0, meta.size());
      } else if (absl::Status s =
                     ParsePax(meta, &pax_path, &pax_size, &pax_has_size);
                 !s.ok()) {
        return bad(s.message());
      }
      at = next;
      continue;
    }
    std::string name = Field(header, 0, 100);
    if (header.compare(257, 5, "ustar") == 0) {
      const std::string prefix = Field(header, 345, 155);
      if (!prefix.empty()) name = absl::StrCat(prefix, "/", name);
    }
    if (!long_name.empty()) name = std::move(long_name);
    if (!pax_path.empty()) name = std::move(pax_path);
    long_name.clear();
    pax_path.clear();
    pax_has_size = false;
    if (type == '0' || type == '\0' || type == '7') {
      out.files.push_back({std::move(name), data_at, size});
    } else if (type != '5' && type != 'g') {
      out.others.push_back(std::move(name));
    }
    at = next;
  }
  return out;
}

absl::StatusOr<TarListing> ListTarBytes(std::string_view archive) {
  return ListTar(
      [archive](uint64_t offset, uint64_t size, std::string* out) {
        if (offset > archive.size() || size > archive.size() - offset) {
          return absl::DataLossError("truncated");
        }
        out->assign(archive.substr(offset, size));
        return absl::OkStatus();
      },
      archive.size());
}

}  // namespace stoker::dataset
