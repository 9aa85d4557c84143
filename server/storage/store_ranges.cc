#include "server/storage/store_ranges.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker::storage {
namespace {

class StoreRangeSource : public dataset::RangeSource {
 public:
  explicit StoreRangeSource(std::shared_ptr<Store> store)
      : store_(std::move(store)) {}

  std::string Url(const std::string& file) const override {
    return absl::StrCat(store_->Display(), "/", file);
  }

  absl::StatusOr<std::string> Read(const std::string& file, uint64_t offset,
                                   uint64_t length) override {
    // Store::Read reads to the end of the file for length 0.
    if (length == 0) return std::string();
    return store_->Read(file, offset, length);
  }

 private:
  const std::shared_ptr<Store> store_;
};

}  // namespace

std::unique_ptr<dataset::RangeSource> StoreRanges(
    std::shared_ptr<Store> store) {
  return std::make_unique<StoreRangeSource>(std::move(store));
}

}  // namespace stoker::storage
