#include "server/dataset/importers/npy.h"

#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stoker::dataset {
namespace {

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat(".npy: ", what));
}

// The text after `'key':` in the header dict, or npos.
size_t ValueAt(std::string_view header, std::string_view key) {
  const std::string quoted = absl::StrCat("'", std::string(key), "'");
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return at;
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return at;
  at = header.find_first_not_of(' ', at + 1);
  return at;
}

absl::StatusOr<tensor::DType> DTypeOf(std::string_view descr) {
  if (descr.size() < 2) return Bad(absl::StrCat("bad dtype '", std::string(descr), "'"));
  const char order = descr[0];
  const std::string_view code = descr.substr(1);
  struct Known {
    std::string_view code;
    tensor::DType dtype;
  };
  static constexpr Known kKnown[] = {
      {"b1", tensor::DType::kBool},    {"u1", tensor::DType::kUint8},
      {"i1", tensor::DType::kInt8},    {"u2", tensor::DType::kUint16},
      {"i2", tensor::DType::kInt16},   {"i4", tensor::DType::kInt32},
      {"i8", tensor::DType::kInt64},   {"f2", tensor::DType::kFloat16},
      {"f4", tensor::DType::kFloat32}, {"f8", tensor::DType::kFloat64},
  };
  for (const Known& k : kKnown) {
    if (k.code != code) continue;
    const bool one_byte = tensor::DTypeSize(k.dtype) == 1;
    if (order == '<' || (order == '|' && one_byte) ||
        (order == '>' && one_byte)) {
      return k.dtype;
    }
    return Bad(absl::StrCat("dtype '", std::string(descr),
                            "' is not little-endian; convert with "
                            "arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  if (code.find('O') != std::string_view::npos) {
    return Bad(absl::StrCat("dtype '", std::string(descr),
                            "' is not supported (object arrays hold Python "
                            "objects)"));
  }
  return Bad(absl::StrCat("dtype '", std::string(descr), "' is not supported"));
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(std::string_view file) {
  if (file.size() < 10 || file.substr(0, 6) != "\x93NUMPY") {
    return Bad("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(file[6]);
  uint64_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(file[8]) |
                 static_cast<unsigned char>(file[9]) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return Bad("truncated header");
    for (int i = 3; i >= 0; --i) {
      header_len = header_len << 8 | static_cast<unsigned char>(file[8 + i]);
    }
    header_at = 12;
  } else {
    return Bad(absl::StrCat("format version ", major, " is not supported"));
  }
  if (header_len > file.size() - header_at) return Bad("truncated header");
  const std::string_view header = file.substr(header_at, header_len);

  NpyArray out;
  size_t at = ValueAt(header, "descr");
  if (at == std::string_view::npos || header[at] != '\'') {
    // A structured dtype is a list: not a plain array.
    return Bad("no plain 'descr' (structured dtypes are not supported)");
  }
  const size_t end = header.find('\'', at + 1);
  if (end == std::string_view::npos) return Bad("unterminated 'descr'");
  absl::StatusOr<tensor::DType> dtype =
      DTypeOf(header.substr(at + 1, end - at - 1));
  if (!dtype.ok()) return dtype.status();
  out.dtype = *dtype;

  at = ValueAt(header, "fortran_order");
  if (at == std::string_view::npos) return Bad("no 'fortran_order'");
  if (header.substr(at, 4) == "True") {
    return Bad("fortran_order arrays are not supported; save "
               "np.ascontiguousarray(arr)");
  }
  if (header.substr(at, 5) != "False") return Bad("bad 'fortran_order'");

  at = ValueAt(header, "shape");
  if (at == std::string_view::npos || header[at] != '(') {
    return Bad("no 'shape' tuple");
  }
  const size_t close = header.find(')', at);
  if (close == std::string_view::npos) return Bad("unterminated 'shape'");
  const std::string_view dims = header.substr(at + 1, close - at - 1);
  uint64_t count = 1;
  for (absl::string_view d :
       absl::StrSplit(absl::string_view(dims.data(), dims.size()), ',',
                      absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0 ||
        v > (int64_t{1} << 40)) {
      return Bad(absl::StrCat("bad shape dimension '", d, "'"));
    }
    out.shape.push_back(v);
    if (v != 0 && count > (uint64_t{1} << 40) / static_cast<uint64_t>(v)) {
      return Bad("shape too large");
    }
    count *= static_cast<uint64_t>(v);
  }
  out.data = file.substr(header_at + header_len);
  const uint64_t need = count * tensor::DTypeSize(out.dtype);
  if (out.data.size() != need) {
    return Bad(absl::StrCat("data is ", out.data.size(), " bytes, shape (",
                            std::string(dims), ") of ",
                            std::string(tensor::DTypeName(out.dtype)),
                            " needs ", need));
  }
  return out;
}

}  // namespace stoker::dataset
