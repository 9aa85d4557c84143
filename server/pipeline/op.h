// Op: one step of a pipeline, as named in the config.
//
// Ops do not touch pixels. Each edits the plan of one sample (ImageState):
// decode_image reads the header, geometry ops edit the View, format ops set
// the OutputFormat. BoundPipeline then executes the plan once, in
// RenderImage. Ops come from the registry (registry.h); each lives in one
// file in ops/ with one registration line.
//
// Thread-safety: an Op is immutable after its factory returns. Apply is
// const and may run on many threads at once; its randomness comes only from
// the SampleRng it is handed. Ops never start threads.
#ifndef STOKER_SERVER_PIPELINE_OP_H_
#define STOKER_SERVER_PIPELINE_OP_H_

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/pipeline/decoders/decoder_set.h"
#include "server/pipeline/image_plan.h"
#include "server/pipeline/pixel_convert.h"
#include "server/pipeline/registry.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::pipeline {

// The plan of one sample's image while its ops run.
struct ImageState {
  std::string_view encoded;  // Encoded bytes; borrowed for the sample's run.
  DecoderSet* decoders = nullptr;  // Borrowed for the sample's run.
  // Set by decode_image from `decoders`, the header read; owned by them.
  ImageDecoder* decoder = nullptr;
  View view;
  OutputFormat format;
};

// Where an op may stand in a pipeline: all decode ops, then all geometry
// ops, then all format ops.
enum class OpStage { kDecode, kGeometry, kFormat };

// What an op does to the output size, known before any image is seen.
struct SizeEffect {
  enum Kind {
    kKeeps,  // The size stays as it was.
    kFixes,  // Every sample ends up height x width.
    kVaries  // The size depends on the image.
  };
  Kind kind = kKeeps;
  int height = 0, width = 0;  // When kind is kFixes.
};

class Op {
 public:
  virtual ~Op() = default;

  virtual OpStage stage() const = 0;
  virtual SizeEffect size_effect() const { return {}; }

  // Edits `state` for one sample. DataLoss when the image is undecodable.
  virtual absl::Status Apply(ImageState& state, SampleRng& rng) const = 0;
};

// The values of a size argument of type kIntOrPair: one (n) or two
// ([height, width]). InvalidArgument naming the op and the argument unless
// each is a whole number in [1, kMaxImageSide].
inline constexpr int kMaxImageSide = 16384;
absl::StatusOr<std::vector<int>> ParseSizeArg(absl::string_view op,
                                              absl::string_view arg,
                                              const OpArgs& args);

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_OP_H_
