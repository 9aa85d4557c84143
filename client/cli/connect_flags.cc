#include "client/cli/connect_flags.h"

#include <sys/stat.h>

#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stoker::cli {
namespace {

// gRPC's name schemes: an address with one of these is not a file path.
constexpr std::array<const char*, 6> kSchemes = {
    "unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:"};

}  // namespace

absl::Status CheckAddress(const std::string& address) {
  struct stat st;
  if (absl::StartsWith(address, "unix:")) {
    std::string file = address.substr(5);
    if (absl::StartsWith(file, "//")) file.erase(0, 2);
    if (::stat(file.c_str(), &st) != 0) {
      return absl::UnavailableError(
          absl::StrCat("no socket at ", file,
                       ": no stokerd listens there (is it running, "
                       "and is ",
                       file, " its listen.unix?)"));
    }
    return absl::OkStatus();
  }
  for (const char* scheme : kSchemes) {
    if (absl::StartsWith(address, scheme)) return absl::OkStatus();
  }
  if (absl::StrContains(address, '/') || absl::EndsWith(address, ".sock") ||
      ::stat(address.c_str(), &st) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--address ", address,
                     " looks like a file path: a unix socket is "
                     "addressed as unix:",
                     address, " (a TCP address as HOST:PORT)"));
  }
  return absl::OkStatus();
}

void AddConnectFlags(CLI::App* cmd, ConnectFlags* flags) {
  cmd->add_option("--address,-a", flags->address,
                  "gRPC target of the daemon: unix:PATH or HOST:PORT")
      ->capture_default_str();
  TlsOptions& tls = flags->tls;
  cmd->add_option("--tls-ca", tls.ca_file,
                  "TLS to a TCP address: the CA (PEM) that signed the "
                  "daemon's certificate");
  cmd->add_option("--tls-cert", tls.cert_file,
                  "TLS client certificate (PEM), for a daemon with "
                  "listen.tls.client_ca");
  cmd->add_option("--tls-key", tls.key_file, "Key of --tls-cert (PEM)");
  cmd->add_option("--tls-server-name", tls.server_name,
                  "Name the daemon's certificate must carry, when not the "
                  "address's host");
  cmd->add_flag("--tls", flags->use_tls,
                "TLS with the system's CAs (implied by any --tls-* option)");
}

absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(
    const ConnectFlags& flags) {
  if (absl::Status s = CheckAddress(flags.address); !s.ok()) return s;
  const TlsOptions& tls = flags.tls;
  if (!flags.use_tls && tls.ca_file.empty() && tls.cert_file.empty() &&
      tls.key_file.empty() && tls.server_name.empty()) {
    return Client::Connect(flags.address);
  }
  return Client::Connect(flags.address, tls);
}

}  // namespace stoker::cli
