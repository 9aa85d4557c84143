#include "client/lib/transport.h"

#include <algorithm>
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

// The names "auto" stands for, in the order it tries them.
std::vector<absl::string_view> AutoNames() {
  std::vector<const ClientTransportDef*> placed;
  for (const ClientTransportDef& def : Registry()) {
    if (def.auto_place > 0) placed.push_back(&def);
  }
  std::sort(placed.begin(), placed.end(),
            [](const ClientTransportDef* a, const ClientTransportDef* b) {
              return a->auto_place < b->auto_place;
            });
  std::vector<absl::string_view> names;
  for (const ClientTransportDef* def : placed) names.push_back(def->name);
  return names;
}

}  // namespace

ClientTransportRegistrar::ClientTransportRegistrar(
    v1::Transport number, const char* name, int auto_place,
    ClientTransportFactory factory) {
  Registry().push_back({number, name, std::move(factory), auto_place});
}

absl::StatusOr<std::vector<ClientTransportDef>> ParseTransports(
    absl::string_view spec) {
  std::vector<ClientTransportDef> out;
  for (absl::string_view name : absl::StrSplit(spec, ',')) {
    name = absl::StripAsciiWhitespace(name);
    for (absl::string_view one :
         name == "auto" ? AutoNames()
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
