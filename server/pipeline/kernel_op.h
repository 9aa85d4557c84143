// KernelOp: a pixel op that, with probability p, runs one kernel
// (kernels/) on the image of its field, like torchvision's Random* colour
// transforms (RandomSolarize, RandomEqualize, ...). The ops in ops/ that
// are one kernel call build one of these; ProbabilityArg declares their
// `p`.
//
// Thread-safety: immutable; Apply may run on many threads at once.
#ifndef STOKER_SERVER_PIPELINE_KERNEL_OP_H_
#define STOKER_SERVER_PIPELINE_KERNEL_OP_H_

#include <functional>
#include <string>
#include <utility>

#include "server/pipeline/op.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {

class KernelOp final : public PixelOp {
 public:
  // Runs on the image once the op applies; draws any further randomness
  // from the generator. Called from many threads at once.
  using Kernel = std::function<void(const ImageBuffer&, SampleRng&)>;

  KernelOp(double p, Kernel kernel) : p_(p), kernel_(std::move(kernel)) {}

  absl::Status Apply(const PixelTargets& targets,
                     SampleRng& rng) const override {
    if (rng.Bernoulli(p_)) kernel_(targets.main(), rng);
    return absl::OkStatus();
  }

 private:
  const double p_;
  const Kernel kernel_;
};

// The argument `p` in [0, 1], "Probability that the op applies.", with
// torchvision's default for the transform the op copies.
inline ArgSpec ProbabilityArg(double default_p) {
  return ArgSpec::Optional("p", ArgType::kFloat, ArgValue(default_p),
                           "Probability that the op applies.")
      .Between(0, 1);
}

// A KernelOp of probability args["p"] as an op factory's result.
inline absl::StatusOr<AnyOp> MakeKernelOp(const OpArgs& args,
                                          KernelOp::Kernel kernel) {
  return AnyOp(std::unique_ptr<PixelOp>(std::make_unique<KernelOp>(
      *FindArg<double>(args, "p"), std::move(kernel))));
}

}  // namespace stoker::pipeline

#endif  // STOKER_SERVER_PIPELINE_KERNEL_OP_H_
