// Invalid configs, their pipelines: unknown ops, arguments out of range or
// not among the choices, steps out of order (arguments of the wrong type:
// config_errors_op_args_test.cc). Each is rejected with InvalidArgument and
// a message "stoker.yaml:LINE:COL: what was wrong; what was expected".

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::ConfigErrorTest;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST_F(ConfigErrorTest, UnknownOpInPipelineListsTheKnownOps) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
  - decode_jpeg: {}
  - random_crop: {size: 224}
)"),
              AllOf(StartsWith("stoker.yaml:7:5: unknown op 'random_crop' in "
                               "pipeline 'train'; expected one of: "),
                    HasSubstr("center_crop"), HasSubstr("decode_jpeg"),
                    HasSubstr("random_resized_crop")));
}

TEST_F(ConfigErrorTest, MisspelledOpSuggestsTheClosest) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpg
)"),
              StartsWith("stoker.yaml:6:7: unknown op 'decode_jpg' in pipeline "
                         "'train' (did you mean 'decode_jpeg'?); expected "
                         "one of: "));
}

TEST_F(ConfigErrorTest, StepWithArgumentsAtTheWrongIndentIsExplained) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - random_resized_crop:
      size: 224
)"),
            "stoker.yaml:6:7: a step of pipeline 'train' has 2 keys "
            "(random_resized_crop, size); expected one key, the op name, with "
            "its arguments in a map under it");
}

TEST_F(ConfigErrorTest, PipelineThatIsNotAListIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train: {decode_jpeg: {}}
)"),
            "stoker.yaml:5:10: pipeline 'train' is a map without views; "
            "expected a list of ops like [decode_jpeg, center_crop: {size: "
            "224}], or {decode: [decode_image], views: {global: {count: 2, "
            "ops: [{random_resized_crop: {size: 224}}]}, local: {count: 6, "
            "ops: [...]}}}");
}

TEST_F(ConfigErrorTest, PipelineWithoutOpsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train: []
)"),
            "stoker.yaml:5:10: pipeline 'train' has no ops; expected at least "
            "one");
}

TEST_F(ConfigErrorTest, PipelineRejectedByCreateIsPrefixedWithItsLine) {
  // Each op reads, so the registry check passes; that the output size is
  // not fixed is for Create to see, and no one op is to blame.
  const std::string message = Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
  val:
    - decode_jpeg
    - resize: {size: 8}
)");
  EXPECT_THAT(message, StartsWith("stoker.yaml:8:3: pipeline 'val'"));
  EXPECT_THAT(message, HasSubstr("output size is not fixed"));
  EXPECT_THAT(message, Not(HasSubstr("pipeline 'val': pipeline 'val'")));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
}

TEST_F(ConfigErrorTest, OpErrorFromCreateIsReportedAtThatOp) {
  // Each argument is valid alone; mean without std is for the op's
  // factory to refuse, and Create says which op it was.
  const std::string message = Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
  val:
    - decode_jpeg
    - normalize: {mean: [0.5, 0.5, 0.5]}
)");
  EXPECT_THAT(message, StartsWith("stoker.yaml:10:7: pipeline 'val': op[1] "
                                  "'normalize'"));
  EXPECT_THAT(message, HasSubstr("'mean' and 'std' go together"));
  EXPECT_THAT(message, Not(HasSubstr("pipeline 'val': pipeline 'val'")));
}

TEST_F(ConfigErrorTest, PipelineWithOpsOutOfOrderIsRejectedAtTheOp) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: 8}
    - decode_jpeg
)"),
              StartsWith("stoker.yaml:6:7: pipeline 'train': op[0] "
                         "'center_crop'"));
}

TEST_F(ConfigErrorTest, SecondDecodeOfOneFieldIsRejectedAtThatOp) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  seg:
    - decode_image: {field: image}
    - decode_image: {field: image, interpolation: nearest}
    - center_crop: {size: 8}
)"),
            "stoker.yaml:7:7: pipeline 'seg': op[1] 'decode_image' (line 7): "
            "field 'image' is already decoded by an earlier decode op");
}

TEST_F(ConfigErrorTest, PixelOpOnANearestFieldIsRejectedAtThatOp) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  seg:
    - decode_image
    - decode_image: {field: mask, interpolation: nearest}
    - center_crop: {size: 8}
    - solarize: {field: mask, threshold: 128}
)"),
              AllOf(StartsWith("stoker.yaml:9:7: pipeline 'seg': op[3] "
                               "'solarize' (line 9): field 'mask' is decoded "
                               "with interpolation: nearest"),
                    HasSubstr("bind the op to an image field")));
}

TEST_F(ConfigErrorTest, DecodeAfterAGeometryOpIsRejectedAtThatOp) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  seg:
    - decode_image
    - center_crop: {size: 8}
    - decode_image: {field: mask, interpolation: nearest}
)"),
            "stoker.yaml:8:7: pipeline 'seg': op[2] 'decode_image' (line 8): "
            "out of order: decode ops come first, before every other op");
}

TEST_F(ConfigErrorTest, UnknownDecodeInterpolationIsRefusedAtTheValue) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  seg:
    - decode_image: {field: mask, interpolation: bicubic}
    - center_crop: {size: 8}
)"),
              StartsWith("stoker.yaml:6:50: argument 'interpolation' of op "
                         "'decode_image' in pipeline 'seg'"));
}

TEST_F(ConfigErrorTest, ValueOutOfRangeIsRefusedAtItsColumnWithTheRange) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - random_flip: {p: 1.5}
    - center_crop: {size: 8}
)"),
            "stoker.yaml:7:24: argument 'p' of op 'random_flip' in pipeline "
            "'train': expected a number in [0, 1], got '1.5'");
}

TEST_F(ConfigErrorTest, NegativeSizeIsRefusedAtTheValueWithItsRange) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - resize: {size: -1}
)"),
            "stoker.yaml:7:22: argument 'size' of op 'resize' in pipeline "
            "'train': expected values in [1, 16384], got '-1'");
}

TEST_F(ConfigErrorTest, ListElementOutOfRangeIsRefusedAtTheElement) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - random_resized_crop: {size: 8, scale: [0.5, 1.5]}
)"),
            "stoker.yaml:7:51: argument 'scale' of op 'random_resized_crop' "
            "in pipeline 'train': expected values in (0, 1], got '1.5'");
}

TEST_F(ConfigErrorTest, ValueNotAmongTheChoicesIsRefusedListingThem) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
    - layout: nhwc
)"),
            "stoker.yaml:8:15: argument 'value' of op 'layout' in pipeline "
            "'train': expected chw or hwc, got 'nhwc'");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
    - normalize: {dtype: int8}
)"),
            "stoker.yaml:8:26: argument 'dtype' of op 'normalize' in pipeline "
            "'train': expected float32, float16 or uint8, got 'int8'");
}

TEST_F(ConfigErrorTest, MixupOnAUint8OutputIsRefusedAtTheOp) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
    - mixup: {alpha: 0.2, num_classes: 10}
)"),
              AllOf(StartsWith("stoker.yaml:8:7: pipeline 'train': op[2] "
                               "'mixup'"),
                    HasSubstr("uint8 output would round")));
  // mixup_cutmix with MixUp on is refused alike; CutMix alone copies
  // pixels, so a uint8 output takes it.
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
    - mixup_cutmix: {mixup_alpha: 0.8, cutmix_alpha: 1.0, num_classes: 10}
)"),
              StartsWith("stoker.yaml:8:7: pipeline 'train': op[2] "
                         "'mixup_cutmix'"));
  const absl::StatusOr<ServerOptions> cutmix_only = LoadConfigString(
      absl::StrReplaceAll(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - center_crop: {size: 8}
    - mixup_cutmix: {mixup_alpha: 0, cutmix_alpha: 1.0, num_classes: 10}
)",
                          {{"$D", (dir_.path() / "d").string()}}),
      "stoker.yaml");
  EXPECT_TRUE(cutmix_only.ok()) << cutmix_only.status();
}

TEST_F(ConfigErrorTest, AnOpInAViewIsReportedAtItsLine) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  dino:
    decode: [decode_image]
    views:
      global: [{random_resized_crop: {size: 224}}]
      local:
        count: 6
        ops:
          - random_resized_crop: {size: 96}
          - drop_fields: {value: [label]}
)"),
              StartsWith("stoker.yaml:13:13: pipeline 'dino': view 'local': "
                         "op[1] 'drop_fields' (line 13): decode and fields "
                         "ops go in the pipeline's decode list"));
}

TEST_F(ConfigErrorTest, AViewOfTheWrongShapeIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  dino:
    views:
      local: {count: 6}
)"),
            "stoker.yaml:7:14: pipeline 'dino', view 'local' has no ops; "
            "expected {count: N, ops: [...]} or a list of ops");
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  dino:
    views:
      local: {count: 6, opps: [resize: {size: [9, 9]}]}
)"),
              StartsWith("stoker.yaml:7:25: unknown key 'opps' in view "
                         "'local' (did you mean 'ops'?)"));
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  dino:
    decode: [decode_image]
    view: {}
)"),
              StartsWith("stoker.yaml:7:5: unknown key 'view' in pipeline "
                         "'dino' (did you mean 'views'?)"));
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  dino:
    views:
      local: {count: 65, ops: [resize: {size: [9, 9]}]}
)"),
              HasSubstr("pipeline 'dino': view 'local' (line 7): count 65 "
                        "is outside 1..64"));
}

}  // namespace
}  // namespace stoker::config
