#include "client/lib/transport.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

std::vector<ClientTransportDef>& Registry() {
  static auto* registry = new std::vector<ClientTransportDef>();
  return *registry;
}

// The protocol's name of `number`: "TRANSPORT_CUDA_IPC" -> "cuda_ipc".
std::string ProtoName(v1::Transport number) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::Transport_Name(number), "TRANSPORT_"));
}

absl::StatusOr<ClientTransportDef> Find(absl::string_view name) {
  for (const ClientTransportDef& def : Registry()) {
    if (def.name == name) return def;
  }
  v1::Transport number;
  if (!name.empty() &&
      v1::Transport_Parse(absl::StrCat("TRANSPORT_", absl::AsciiStrToUpper(name)),
                          &number) &&
      number != v1::TRANSPORT_UNSPECIFIED) {
    return ClientTransportDef{number, std::string(name), nullptr};
  }
  std::vector<std::string> names;
  for (int n = v1::Transport_MIN + 1; n <= v1::Transport_MAX; ++n) {
    if (v1::Transport_IsValid(n)) {
      names.push_back(ProtoName(static_cast<v1::Transport>(n)));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "transport '", name, "' is unknown; use ", absl::StrJoin(names, ", "),
      ", auto, or a list like ", absl::StrJoin(names.rbegin(), names.rend(), ",")));
}

}  // namespace

ClientTransportRegistrar::ClientTransportRegistrar(
    v1::Transport number, const char* name, ClientTransportFactory factory) {
  Registry().push_back({number, name, std::move(factory)});
}

absl::StatusOr<std::vector<ClientTransportDef>> ParseTransports(
    absl::string_view spec) {
  std::vector<ClientTransportDef> out;
  for (absl::string_view name : absl::StrSplit(spec, ',')) {
    name = absl::StripAsciiWhitespace(name);
    for (absl::string_view one :
         name == "auto" ? std::vector<absl::string_view>{"shm", "grpc"}
         : name.empty() ? std::vector<absl::string_view>{"grpc"}
                        : std::vector<absl::string_view>{name}) {
      absl::StatusOr<ClientTransportDef> def = Find(one);
      if (!def.ok()) return def.status();
      out.push_back(*std::move(def));
    }
  }
  return out;
}

std::string TransportName(v1::Transport number) {
  if (number == v1::TRANSPORT_UNSPECIFIED) number = v1::TRANSPORT_GRPC;
  for (const ClientTransportDef& def : Registry()) {
    if (def.number == number) return def.name;
  }
  return ProtoName(number);
}

}  // namespace stoker
