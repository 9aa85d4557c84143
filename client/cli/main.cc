// stoker: the command line of Stoker. Subcommands pack, verify and inspect
// work on datasets; pull and push copy them to and from shared storage;
// stream consumes a stream from a running stokerd.
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "client/cli/dataset_commands.h"
#include "client/cli/stream_command.h"
#include "client/cli/top_command.h"
#include "client/cli/transfer_commands.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "server/pipeline/decoders/image_decoder.h"

int main(int argc, char** argv) {
  CLI::App app{
      "stoker: pack datasets for stokerd, check them, copy them to and "
      "from shared storage, and stream from a running daemon"};
  app.require_subcommand(1);
  stoker::cli::AddDatasetCommands(
      app, [](std::string_view bytes) -> absl::StatusOr<std::string> {
        if (absl::Status s = stoker::pipeline::ValidateImage(bytes); !s.ok()) {
          return s;
        }
        // The manifest's "formats" name them in lower case: "jpeg", "png".
        return absl::AsciiStrToLower(
            std::string(stoker::pipeline::ImageFormatName(
                stoker::pipeline::SniffImageFormat(bytes))));
      });
  stoker::cli::AddStreamCommand(app);
  stoker::cli::AddTopCommand(app);
  stoker::cli::AddTransferCommands(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
