// The config file's schema as data: every key, its type, default and meaning.
// The loader takes its allowed keys from here and ConfigReference() prints
// the same table, so the documentation cannot drift from what is accepted.
//
// Thread-safety: pure functions; the op registry is only read.

#ifndef STOKER_SERVER_CONFIG_CONFIG_REFERENCE_H_
#define STOKER_SERVER_CONFIG_CONFIG_REFERENCE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

namespace stoker::config {

// A Markdown reference of the config file: a table of every key with its
// type, default and meaning, then a table of the pipeline ops from the op
// registry with their arguments. docs/config.md is it (docs/gen-config.sh) and
// `stokerd --help-config` prints it.
std::string ConfigReference();

// The keys allowed directly under `section`, a dotted path as the reference
// writes it: "" is the top level, "limits", "listen", "datasets.NAME".
std::vector<std::string> AllowedKeys(absl::string_view section);

}  // namespace stoker::config

#endif  // STOKER_SERVER_CONFIG_CONFIG_REFERENCE_H_
