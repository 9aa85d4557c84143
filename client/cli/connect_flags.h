// The flags every command that talks to a daemon shares: --address and the
// TLS files (--tls-ca, --tls-cert, --tls-key, --tls-server-name), and the
// connect that follows from them.
#ifndef STOKER_CLIENT_CLI_CONNECT_FLAGS_H_
#define STOKER_CLIENT_CLI_CONNECT_FLAGS_H_

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "stoker/client.h"

namespace stoker::cli {

struct ConnectFlags {
  std::string address = "unix:/run/stoker/stoker.sock";
  // TLS is on when any of its files or the server name is given.
  TlsOptions tls;
  bool use_tls = false;
};

// Adds --address and the --tls-* flags to `cmd`; `flags` must outlive it.
void AddConnectFlags(CLI::App* cmd, ConnectFlags* flags);

// Checks an --address before any connect, so that a mistake fails at once
// rather than after gRPC's connect timeout: InvalidArgument for a file path
// without "unix:" (gRPC would look it up as a host name), suggesting
// unix:PATH; Unavailable naming the file when a unix:PATH has no file.
absl::Status CheckAddress(const std::string& address);

// A client for the flags: plaintext, or TLS when a --tls-* flag was given.
// Fails first as CheckAddress does.
absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(
    const ConnectFlags& flags);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_CONNECT_FLAGS_H_
