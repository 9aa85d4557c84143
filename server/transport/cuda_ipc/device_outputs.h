// What a cuda_ipc stream's device does to each tensor of a batch the CPU
// pipeline rendered (BindMode::kRendered: images as uint8 HWC): the plan
// that turns the rendered batch, copied to the GPU, into the tensors the
// pipeline bound in full would have written, and where each goes in the
// device slot.
//
// Each image output that the format stage changes (normalize, layout) is
// written by the normalize kernel (device_normalize.h); every other tensor
// (labels, masks that stay uint8, pass-through fields) is copied as it is.
// The kernel's table is not computed from the config: it is read off the
// CPU's own format stage (BoundPipeline::FormatRendered) run on probe
// images that hold every byte value in every channel, and the probe checks
// that the format stage is a per-pixel, per-channel lookup at all. So the
// device output equals the CPU's bit for bit, whatever normalize, layout and
// views say, and a format the kernel cannot write is refused at open.
//
// Thread-safety: plain values and a pure function.
#ifndef STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_OUTPUTS_H_
#define STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_OUTPUTS_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/pipeline/pipeline.h"
#include "server/tensor/tensor_spec.h"
#include "server/transport/cuda_ipc/device_normalize.h"

namespace stoker::transport {

struct DeviceOutput {
  // The per-sample spec the client reads (the full bind's).
  tensor::TensorSpec spec;
  // Set for an image the kernel writes; else the tensor is copied.
  std::optional<NormalizePlan> normalize;
  std::optional<NormalizeTable> table;  // With normalize.
};

// One entry per rendered output, in order. FAILED_PRECONDITION naming the
// pipeline's part the device cannot do: a batch op (mixup, cutmix), an
// image output whose format is not a per-channel lookup or whose dtype the
// kernel does not write. REQUIRES: `rendered` are the per-sample outputs of
// `full`'s pipeline bound kRendered.
absl::StatusOr<std::vector<DeviceOutput>> PlanDeviceOutputs(
    const pipeline::BoundPipeline& full,
    const std::vector<tensor::TensorSpec>& rendered);

// Bytes of a device slot that holds a whole batch of `batch_size` samples
// of `outputs`, each tensor 64-byte aligned (service::BatchLayout's rule),
// ragged tensors at their most (`slots`: the full bind's slots).
size_t DeviceSlotBytes(const pipeline::BoundPipeline& full,
                       uint32_t batch_size);

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_CUDA_IPC_DEVICE_OUTPUTS_H_
