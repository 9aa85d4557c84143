// `stoker pull` and `stoker push`: copy a packed dataset between shared
// storage (an S3-compatible object store, an HTTP(S) server, a mount) and a
// local folder, checked, resumable, with progress (server/storage/).
// Failures throw CLI::RuntimeError with exit code 1, as the dataset
// commands do.
#ifndef STOKER_CLIENT_CLI_TRANSFER_COMMANDS_H_
#define STOKER_CLIENT_CLI_TRANSFER_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace stoker::cli {

void AddTransferCommands(CLI::App& app);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_TRANSFER_COMMANDS_H_
