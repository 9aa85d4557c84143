// `stoker pack`, `stoker verify` and `stoker inspect`: the command-line face
// of the dataset layer (server/dataset/). Each subcommand runs in its CLI11
// callback and, on failure, throws CLI::RuntimeError with exit code 1, which
// CLI11_PARSE turns into the process's exit code.
#ifndef STOKER_CLIENT_CLI_DATASET_COMMANDS_H_
#define STOKER_CLIENT_CLI_DATASET_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "server/dataset/field_kind.h"

namespace stoker::cli {

// Registers pack, verify and inspect on `app`. `validate_image` checks that
// bytes are a decodable image and names its format: pack runs it on every
// source file (and counts the formats in the manifest), verify on every
// stored image when given --decode. It is called from several threads at
// once.
void AddDatasetCommands(CLI::App& app, dataset::ImageCheck validate_image);

}  // namespace stoker::cli

#endif  // STOKER_CLIENT_CLI_DATASET_COMMANDS_H_
