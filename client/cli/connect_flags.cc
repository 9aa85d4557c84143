#include "client/cli/connect_flags.h"

namespace stoker::cli {

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
  const TlsOptions& tls = flags.tls;
  if (!flags.use_tls && tls.ca_file.empty() && tls.cert_file.empty() &&
      tls.key_file.empty() && tls.server_name.empty()) {
    return Client::Connect(flags.address);
  }
  return Client::Connect(flags.address, tls);
}

}  // namespace stoker::cli
