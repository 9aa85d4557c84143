// A Store (store.h) as the dataset layer's RangeSource (range_source.h):
// what a dataset served while staging reads its remote records through.
//
// Thread-safe, as Store is.
#ifndef STOKER_SERVER_STORAGE_STORE_RANGES_H_
#define STOKER_SERVER_STORAGE_STORE_RANGES_H_

#include <memory>

#include "server/dataset/range_source.h"
#include "server/storage/store.h"

namespace stoker::storage {

// `store` is shared: the copy that stages a dataset (Pull) and the
// dataset's record reads use it at once, and either may end first.
std::unique_ptr<dataset::RangeSource> StoreRanges(std::shared_ptr<Store> store);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_STORE_RANGES_H_
