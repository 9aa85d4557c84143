#include "server/transport/transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace stoker::transport {
namespace {

struct Registered {
  v1::Transport number;
  std::string name;
  TransportFactory factory;
};

std::vector<Registered>& Registry() {
  static auto* registry = new std::vector<Registered>();
  return *registry;
}

// "TRANSPORT_CUDA_IPC" -> "cuda_ipc".
std::string ProtoName(v1::Transport number) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::Transport_Name(number), "TRANSPORT_"));
}

}  // namespace

TransportRegistrar::TransportRegistrar(v1::Transport number, const char* name,
                                       TransportFactory factory) {
  Registry().push_back({number, name, std::move(factory)});
}

Transports::Transports(const TransportEnv& env) {
  for (const Registered& r : Registry()) {
    entries_.push_back({r.number, r.factory(env)});
  }
  // Static registration runs in no set order: keep the protocol's.
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.number < b.number; });
}

std::string Transports::Name(v1::Transport number) {
  if (number == v1::TRANSPORT_UNSPECIFIED) number = v1::TRANSPORT_GRPC;
  for (const Registered& r : Registry()) {
    if (r.number == number) return r.name;
  }
  return ProtoName(number);
}

absl::StatusOr<Transport*> Transports::Find(v1::Transport number) const {
  if (number == v1::TRANSPORT_UNSPECIFIED) number = v1::TRANSPORT_GRPC;
  for (const Entry& e : entries_) {
    if (e.number != number) continue;
    if (absl::Status s = e.transport->Available(); !s.ok()) return s;
    return e.transport.get();
  }
  std::vector<std::string> served;
  for (const Entry& e : entries_) {
    served.push_back(absl::StrCat(Name(e.number), " (",
                                  static_cast<int>(e.number), ")"));
  }
  if (!v1::Transport_IsValid(number)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown transport number ", static_cast<int>(number),
        "; this daemon serves ", absl::StrJoin(served, ", ")));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "this daemon has no ", ProtoName(number),
      " transport: it was built without it; it serves ",
      absl::StrJoin(served, ", ")));
}

absl::Status Transports::Start() {
  for (Entry& e : entries_) {
    if (absl::Status s = e.transport->Start(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void Transports::Stop() {
  for (Entry& e : entries_) e.transport->Stop();
}

std::vector<service::NamedCount> Transports::Counters() const {
  std::vector<service::NamedCount> out;
  for (const Entry& e : entries_) {
    for (service::NamedCount& c : e.transport->Counters()) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<service::BufferSource>> Transports::RunMemory(
    uint32_t count, size_t bytes, std::shared_ptr<void> hold) {
  for (Entry& e : entries_) {
    auto memory = e.transport->RunMemory(count, bytes, hold);
    if (!memory.ok() || *memory != nullptr) return memory;
  }
  return std::shared_ptr<service::BufferSource>();
}

}  // namespace stoker::transport
