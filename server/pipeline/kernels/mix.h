// The per-batch mixing kernels of MixUp and CutMix, as torchvision's
// references/classification/transforms.py (RandomMixup, RandomCutmix)
// computes them: sample i is mixed with its partner i - 1, sample 0 with
// the last (batch.roll(1, 0)), with one lambda for the whole batch; the
// soft labels mix with the same lambda.
//
// Every kernel works in place. It runs from the last sample down to the
// first, so that each partner is still unmixed when it is read, and keeps
// a copy of the last sample (or of its box) for the first: the memory a
// rolled copy of the batch would take is one sample's.
//
// Arithmetic follows torch's float32 ops one by one, so that the result is
// the reference's bit for bit: MixUp is x * float(lambda) + x_rolled *
// float(1 - lambda), each product rounded to float before the sum (torch
// runs mul_ and add_ as two ops). float16 images are mixed in float and
// rounded back once.
//
// Thread-safety: pure functions of their arguments; the batch belongs to
// the caller.
#ifndef STOKER_SERVER_PIPELINE_KERNELS_MIX_H_
#define STOKER_SERVER_PIPELINE_KERNELS_MIX_H_

#include "server/pipeline/op.h"
#include "server/pipeline/sample_rng.h"

namespace stoker::pipeline::kernels {

// CutMix's box, rows [y1, y2) and columns [x1, x2), and the lambda the
// labels mix with: 1 - box area / image area.
struct CutBox {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  double lambda = 1.0;
};

// torchvision's RandomCutmix box for `lambda` on a height x width image:
// r = 0.5 * sqrt(1 - lambda), half sides int(r * width) and int(r *
// height), a centre drawn uniform in [0, width) then [0, height), the box
// clamped to the image.
CutBox DrawCutBox(int height, int width, double lambda, SampleRng& rng);

// Mixes each image with its partner: x = lambda * x + (1 - lambda) *
// partner. REQUIRES: image dtype float32 or float16.
void MixUpImages(const BatchImages& batch, double lambda);

// Pastes the partner's `box` into each image. Any dtype, either layout.
void PasteBox(const BatchImages& batch, const CutBox& box);

// Mixes each sample's soft labels with its partner's with `lambda`.
void MixSoftLabels(const BatchImages& batch, double lambda);

}  // namespace stoker::pipeline::kernels

#endif  // STOKER_SERVER_PIPELINE_KERNELS_MIX_H_
