// `stoker top`: a live terminal view of a running stokerd, refreshed every
// second: streams and jobs with their rates, the consumers' data stall, the
// time per stage, where each dataset lives, and a verdict with the change to
// make (see top_view.h for how it is reached). `--once --json` prints one
// JSON document instead, for scripts and tests.
#ifndef STOKER_CLIENT_CLI_TOP_COMMAND_H_
#define STOKER_CLIENT_CLI_TOP_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "client/cli/top_view.h"

namespace stoker::cli {

void AddTopCommand(CLI::App& app);

// The screen `stoker top` draws for `view`.
std::string Render(const TopView& view, const std::string& address);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_TOP_COMMAND_H_
