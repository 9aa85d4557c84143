#include "server/storage/store.h"

namespace stoker::storage {

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const Location& location,
                                                 const StoreOptions& options) {
  switch (location.kind) {
    case Location::Kind::kLocal:
      return MakeLocalStore(location);
    case Location::Kind::kHttp:
      return MakeHttpStore(location, options);
    case Location::Kind::kS3:
      return MakeS3Store(location, options);
  }
  return absl::InternalError("unknown location kind");
}

}  // namespace stoker::storage
