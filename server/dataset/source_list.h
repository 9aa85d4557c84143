// The two source layouts that `stoker pack` reads, turned into one ordered
// list of (file, label).
//
// ImageFolder: SRC/<class>/.../<file>. The class of a file is the immediate
// subfolder of SRC it lies under (files in deeper folders included); labels
// are indices into the sorted class names; files are sorted by path within a
// class. Every non-hidden file is listed, whatever its extension, so a file
// that is not an image is caught and reported by the packer's check rather
// than silently left out. Hidden entries (".DS_Store", ".git/") are ignored.
// Files directly in SRC have no class and are reported as rejected. A class
// folder with no files is refused, as torchvision refuses it: it would
// shift the labels of the classes after it.
//
// List file: one `path,label` per line; the path may contain commas (the
// label follows the last one), a relative path is relative to the list
// file's folder, the label is an integer. Blank lines and lines starting
// with '#' are ignored. The order of the file is kept.
//
// Thread-safe: the functions share no state.
#ifndef STOKER_SERVER_DATASET_SOURCE_LIST_H_
#define STOKER_SERVER_DATASET_SOURCE_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

// A source file that did not become a sample, and why.
struct SkippedFile {
  std::string path;
  std::string reason;
};

struct SourceFile {
  std::string path;
  int64_t label = 0;
};

struct SourceListing {
  std::vector<SourceFile> files;      // In the order ids will follow.
  std::vector<std::string> classes;   // ImageFolder only: label i's name.
  std::vector<SkippedFile> rejected;  // Entries that cannot be samples.
};

// NotFound if `root` is not a directory; an error naming the path if a
// folder in it cannot be listed.
absl::StatusOr<SourceListing> ListImageFolder(const std::string& root);

// NotFound if `list_file` cannot be opened; InvalidArgument naming
// "file:line" for a malformed line.
absl::StatusOr<SourceListing> ReadListFile(const std::string& list_file);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_SOURCE_LIST_H_
