#include "server/transport/cuda_ipc/device_outputs.h"

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/service/batch.h"

namespace stoker::transport {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string Describe(const tensor::TensorSpec& spec) {
  return absl::StrCat(std::string(tensor::DTypeName(spec.dtype)), " ",
                      ShapeText(spec.shape));
}

bool SameTensor(const tensor::TensorSpec& a, const tensor::TensorSpec& b) {
  return a.dtype == b.dtype && a.shape == b.shape &&
         a.offsets_for == b.offsets_for;
}

std::optional<DeviceDType> DeviceDTypeOf(tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::kUint8:
      return DeviceDType::kUint8;
    case tensor::DType::kFloat16:
      return DeviceDType::kFloat16;
    case tensor::DType::kFloat32:
      return DeviceDType::kFloat32;
    default:
      return std::nullopt;
  }
}

absl::Status CannotFormat(size_t output, const tensor::TensorSpec& spec,
                          const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "transport cuda_ipc cannot write output ", output, " '", spec.name,
      "' (", Describe(spec), ") on the GPU: ", why, "; use transport shm"));
}

// The kernel's table for image output `t`, read off FormatRendered on probe
// images in which every channel takes every byte value; an error when the
// output is not one lookup per channel and byte.
absl::StatusOr<NormalizeTable> ProbeTable(const pipeline::BoundPipeline& full,
                                          size_t t, const NormalizePlan& plan) {
  const tensor::TensorSpec& spec = full.outputs()[t];
  const size_t pixels = static_cast<size_t>(plan.height) * plan.width;
  const size_t elem = DeviceDTypeSize(plan.dtype);
  std::vector<uint8_t> src(pixels * 3);
  std::unique_ptr<uint8_t, decltype(&std::free)> dst(
      static_cast<uint8_t*>(std::aligned_alloc(
          service::BatchLayout::kAlignment,
          service::BatchLayout::AlignUp(plan.output_bytes()))),
      &std::free);
  std::array<uint32_t, NormalizeTable::kEntries> entries{};
  std::array<bool, NormalizeTable::kEntries> seen{};
  // Enough probes that pixel p + round * pixels covers 0..255.
  const size_t rounds = (256 + pixels - 1) / pixels;
  for (size_t round = 0; round < rounds; ++round) {
    for (size_t p = 0; p < pixels; ++p) {
      for (size_t c = 0; c < 3; ++c) {
        src[p * 3 + c] =
            static_cast<uint8_t>((p + round * pixels + c * 85) % 256);
      }
    }
    full.FormatRendered(t, src.data(), dst.get());
    for (size_t p = 0; p < pixels; ++p) {
      for (size_t c = 0; c < 3; ++c) {
        const size_t at = plan.chw ? c * pixels + p : p * 3 + c;
        uint32_t bits = 0;
        std::memcpy(&bits, dst.get() + at * elem, elem);
        const size_t entry = c * 256 + src[p * 3 + c];
        if (!seen[entry]) {
          seen[entry] = true;
          entries[entry] = bits;
        } else if (entries[entry] != bits) {
          return CannotFormat(
              t, spec,
              "its format stage does not map each channel's byte to one value");
        }
      }
    }
  }
  return NormalizeTable(entries);
}

}  // namespace

absl::StatusOr<std::vector<DeviceOutput>> PlanDeviceOutputs(
    const pipeline::BoundPipeline& full,
    const std::vector<tensor::TensorSpec>& rendered) {
  if (full.has_batch_op()) {
    return absl::FailedPreconditionError(
        "transport cuda_ipc does not run a pipeline's batch op (mixup, "
        "cutmix, mixup_cutmix) on the GPU yet; use transport shm");
  }
  const std::vector<tensor::TensorSpec>& outputs = full.outputs();
  if (outputs.size() != rendered.size()) {
    return absl::InternalError(absl::StrCat(
        "the rendered pipeline has ", rendered.size(),
        " outputs and the full one ", outputs.size()));
  }
  std::vector<DeviceOutput> plan(outputs.size());
  for (size_t t = 0; t < outputs.size(); ++t) {
    const tensor::TensorSpec& r = rendered[t];
    const tensor::TensorSpec& f = outputs[t];
    plan[t].spec = f;
    if (SameTensor(r, f)) continue;  // Copied as it is.
    const bool image = t < full.num_image_outputs() &&
                       r.dtype == tensor::DType::kUint8 &&
                       r.shape.size() == 3 && r.shape[2] == 3;
    if (!image) {
      return CannotFormat(t, f,
                          absl::StrCat("the CPU renders it as ", Describe(r),
                                       " and only images are formatted there"));
    }
    NormalizePlan p;
    std::optional<DeviceDType> dtype = DeviceDTypeOf(f.dtype);
    if (!dtype.has_value()) {
      return CannotFormat(t, f, "the kernel writes uint8, float16 or float32");
    }
    p.dtype = *dtype;
    p.height = static_cast<int>(r.shape[0]);
    p.width = static_cast<int>(r.shape[1]);
    if (f.shape == std::vector<int64_t>{3, p.height, p.width}) {
      p.chw = true;
    } else if (f.shape == r.shape) {
      p.chw = false;
    } else {
      return CannotFormat(t, f,
                          absl::StrCat("its shape is neither CHW nor HWC of ",
                                       Describe(r)));
    }
    absl::StatusOr<NormalizeTable> table = ProbeTable(full, t, p);
    if (!table.ok()) return table.status();
    plan[t].normalize = p;
    plan[t].table = *std::move(table);
  }
  return plan;
}

size_t DeviceSlotBytes(const pipeline::BoundPipeline& full,
                       uint32_t batch_size) {
  return service::BatchLayout(full.slots(), batch_size).Capacity();
}

}  // namespace stoker::transport
