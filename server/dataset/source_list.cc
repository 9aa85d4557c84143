#include "server/dataset/source_list.h"

#include <memory>
#include <utility>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/dataset/file_util.h"
#include "server/dataset/importer.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;

bool IsHidden(const fs::path& p) {
  return p.filename().string().rfind('.', 0) == 0;
}

absl::Status FsError(absl::string_view what, const fs::path& p,
                     const std::error_code& ec) {
  return absl::ErrnoToStatus(
      ec.value(),
      absl::StrCat("cannot ", what, " ", p.string(), ": ", ec.message()));
}

// Appends every non-hidden file under `dir` to `out`, sorted by path, and
// reports entries that are neither folders nor files to `rejected`.
absl::Status ListClass(const fs::path& dir, int64_t label,
                       std::vector<SourceFile>* out,
                       std::vector<SkippedFile>* rejected) {
  std::vector<SourceFile> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    // Type queries get their own code: a broken link is a rejected entry,
    // not a failed listing.
    std::error_code type_ec;
    if (IsHidden(entry.path())) {
      if (entry.is_directory(type_ec)) it.disable_recursion_pending();
      continue;
    }
    // Symlinks to files are followed; symlinks to folders are not
    // descended (a link cycle would never end).
    if (entry.is_regular_file(type_ec)) {
      files.push_back({entry.path().string(), label});
    } else if (type_ec) {
      rejected->push_back({entry.path().string(), type_ec.message()});
    } else if (!entry.is_directory(type_ec)) {
      rejected->push_back({entry.path().string(), "not a regular file"});
    }
  }
  if (ec) return FsError("list", dir, ec);
  std::sort(
      files.begin(), files.end(),
      [](const SourceFile& a, const SourceFile& b) { return a.path < b.path; });
  out->insert(out->end(), files.begin(), files.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SourceListing> ListImageFolder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat("source folder ", root, " is not a directory"));
  }
  SourceListing listing;
  std::vector<fs::path> class_dirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (IsHidden(it->path())) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      class_dirs.push_back(it->path());
    } else {
      listing.rejected.push_back(
          {it->path().string(), "not inside a class folder"});
    }
  }
  if (ec) return FsError("list", root, ec);
  std::sort(class_dirs.begin(), class_dirs.end());
  std::sort(listing.rejected.begin(), listing.rejected.end(),
            [](const SkippedFile& a, const SkippedFile& b) {
              return a.path < b.path;
            });
  std::vector<std::string> empty;
  for (size_t label = 0; label < class_dirs.size(); ++label) {
    listing.classes.push_back(class_dirs[label].filename().string());
    const size_t before = listing.files.size();
    if (absl::Status s = ListClass(class_dirs[label], label, &listing.files,
                                   &listing.rejected);
        !s.ok()) {
      return s;
    }
    if (listing.files.size() == before) {
      empty.push_back(absl::StrCat("'", listing.classes.back(), "' (label ",
                                   label, ")"));
    }
  }
  if (!empty.empty()) {
    // torchvision's ImageFolder refuses a class without files too; taken
    // as a class, it would hold a label no sample has and shift the labels
    // of every class after it.
    return absl::InvalidArgumentError(absl::StrCat(
        "class folder", empty.size() > 1 ? "s " : " ",
        absl::StrJoin(empty, ", "), " in ", root, " hold",
        empty.size() > 1 ? "" : "s",
        " no files: a class without files would take a label no sample "
        "has and shift the label of every class after it by one "
        "(torchvision's ImageFolder refuses it too); put files in it or "
        "remove it"));
  }
  return listing;
}

absl::StatusOr<SourceListing> ReadListFile(const std::string& list_file) {
  std::string text;
  if (absl::Status s = ReadFileToString(list_file, &text); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("list file ", list_file, ": ", s.message()));
  }
  const fs::path base = fs::path(list_file).parent_path();
  SourceListing listing;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat(list_file, ":", line_number, ": ");
    const size_t comma = line.rfind(',');
    if (comma == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected 'path,label', got '", line, "'"));
    }
    const absl::string_view path =
        absl::StripAsciiWhitespace(line.substr(0, comma));
    const absl::string_view label =
        absl::StripAsciiWhitespace(line.substr(comma + 1));
    SourceFile file;
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "empty path"));
    }
    if (!absl::SimpleAtoi(label, &file.label)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "label '", label, "' is not an integer"));
    }
    const fs::path p(std::string{path});
    file.path = p.is_absolute() ? p.string() : (base / p).string();
    listing.files.push_back(std::move(file));
  }
  return listing;
}

namespace {

// Files as samples {image: the file's bytes, label: int64}, from a folder
// or a list file.
class FileListImporter final : public Importer {
 public:
  FileListImporter(std::string source, bool folder)
      : source_(std::move(source)), folder_(folder) {}

  std::string source() const override { return source_; }

  absl::StatusOr<ImportListing> List() override {
    absl::StatusOr<SourceListing> files =
        folder_ ? ListImageFolder(source_) : ReadListFile(source_);
    if (!files.ok()) return files.status();
    ImportListing out;
    absl::StatusOr<FieldSpec> image = MakeFieldSpec("image", "image");
    if (!image.ok()) return image.status();
    absl::StatusOr<FieldSpec> label = MakeFieldSpec("label", "int64");
    if (!label.ok()) return label.status();
    out.schema = {*std::move(image), *std::move(label)};
    files_ = std::move(files->files);
    for (const SourceFile& f : files_) out.samples.push_back(f.path);
    out.classes = std::move(files->classes);
    out.rejected = std::move(files->rejected);
    return out;
  }

  absl::Status Read(uint64_t i,
                    std::vector<std::string>* values) const override {
    values->resize(2);
    if (absl::Status s = ReadFileToString(files_[i].path, &(*values)[0]);
        !s.ok()) {
      return s;
    }
    // Today's message for the commonest bad file, rather than the image
    // kind's "field 'image': empty".
    if ((*values)[0].empty()) return absl::DataLossError("empty file");
    (*values)[1] = EncodeInt64(files_[i].label);
    return absl::OkStatus();
  }

 private:
  const std::string source_;
  const bool folder_;
  std::vector<SourceFile> files_;  // Set by List.
};

}  // namespace

std::unique_ptr<Importer> MakeImageFolderImporter(std::string root) {
  return std::make_unique<FileListImporter>(std::move(root), /*folder=*/true);
}

std::unique_ptr<Importer> MakePathLabelListImporter(std::string list_file) {
  return std::make_unique<FileListImporter>(std::move(list_file),
                                            /*folder=*/false);
}

}  // namespace stoker::dataset
