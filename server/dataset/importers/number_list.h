// A tf.train.Example number list (int64_list, float_list) as the value of
// an ndarray field: each number converted straight to the field's dtype,
// with the same checks as the ndarray kind's FromText (an integer out of
// the dtype's range, a fraction, infinity or NaN for an integer dtype is
// refused) and the shape checked after. A list of n numbers costs its
// output and nothing more (no text in between). Thread-safe: pure
// functions.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_NUMBER_LIST_H_
#define STOKER_SERVER_DATASET_IMPORTERS_NUMBER_LIST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/dataset/field_kind.h"

namespace stoker::dataset {

// InvalidArgument as FromText says it: "field 't': element 1 '256' is not
// a uint8", "field 't': 3 numbers do not fit int32 [-1, 2]".
// REQUIRES: spec is a checked ndarray spec.
absl::StatusOr<std::string> Int64sToArray(const FieldSpec& spec,
                                          absl::Span<const int64_t> numbers);
absl::StatusOr<std::string> FloatsToArray(const FieldSpec& spec,
                                          absl::Span<const float> numbers);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_NUMBER_LIST_H_
