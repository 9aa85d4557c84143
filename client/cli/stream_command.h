// `stoker stream`: the reference client and smoke test. Consumes a stream,
// reports samples/s, and can write the delivered sample ids.
#ifndef STOKER_CLIENT_CLI_STREAM_COMMAND_H_
#define STOKER_CLIENT_CLI_STREAM_COMMAND_H_

#include "CLI/CLI.hpp"

namespace stoker::cli {

void AddStreamCommand(CLI::App& app);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_STREAM_COMMAND_H_
