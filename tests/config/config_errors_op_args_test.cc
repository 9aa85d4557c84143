// Invalid configs, the arguments of their ops: values of the wrong type
// (a scalar for a list, text for a number, a map for a string), missing and
// unknown arguments. Each is rejected with InvalidArgument and a message
// "stoker.yaml:LINE:COL: what was wrong; what was expected".

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/config_test_util.h"

namespace stoker::config {
namespace {

using ::stoker::config::testing::ConfigErrorTest;
using ::testing::StartsWith;

TEST_F(ConfigErrorTest, ScalarWhereListExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - normalize: {mean: 0.5, std: [0.2, 0.2, 0.2]}
)"),
            "stoker.yaml:7:25: argument 'mean' of op 'normalize' in pipeline "
            "'train': expected a list of numbers like [0.5, 0.5, 0.5], got "
            "'0.5'");
}

TEST_F(ConfigErrorTest, NonNumberInFloatListPointsAtTheElement) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - normalize:
        mean: [0.5, 0.5, 0.5]
        std: [0.2, x, 0.2]
)"),
            "stoker.yaml:8:20: argument 'std' of op 'normalize' in pipeline "
            "'train': expected a list of numbers like [0.5, 0.5, 0.5], got "
            "'x'");
}

TEST_F(ConfigErrorTest, TextWhereIntegerExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: {size: big}
)"),
            "stoker.yaml:6:22: argument 'size' of op 'resize' in pipeline "
            "'train': expected an integer or a pair [height, width], got "
            "'big'");
}

TEST_F(ConfigErrorTest, NumberOrRangeIsOneNumberOrAPair) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_image
    - center_crop: {size: 8}
    - color_jitter: {hue: [0.1, 0.2, 0.3]}
)"),
            "stoker.yaml:8:27: argument 'hue' of op 'color_jitter' in "
            "pipeline 'train': expected a number or a pair [lo, hi], got a "
            "list of 3");
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_image
    - center_crop: {size: 8}
    - color_jitter: {brightness: [0.5, -1]}
)"),
            "stoker.yaml:8:40: argument 'brightness' of op 'color_jitter' in "
            "pipeline 'train': expected values >= 0, got '-1'");
}

TEST_F(ConfigErrorTest, FloatWhereIntegerExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: [224, 22.5]}
)"),
            "stoker.yaml:6:33: argument 'size' of op 'center_crop' in "
            "pipeline 'train': expected an integer or a pair [height, width], "
            "got '22.5'");
}

TEST_F(ConfigErrorTest, PairWithThreeElementsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: {size: [1, 2, 3]}
)"),
            "stoker.yaml:6:22: argument 'size' of op 'resize' in pipeline "
            "'train': expected an integer or a pair [height, width], got a "
            "list of 3");
}

TEST_F(ConfigErrorTest, MapWhereStringExpectedIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - layout: {value: chw}
    - normalize: {mean: [0], std: [1], dtype: {x: 1}}
)"),
            "stoker.yaml:7:47: argument 'dtype' of op 'normalize' in pipeline "
            "'train': expected a string, got a map");
}

TEST_F(ConfigErrorTest, MissingRequiredArgumentIsRejectedAtTheOp) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg
    - resize: {}
)"),
            "stoker.yaml:7:7: op 'resize' in pipeline 'train' is missing "
            "required argument 'size'; expected an integer or a pair "
            "[height, width]");
}

TEST_F(ConfigErrorTest, UnknownArgumentSuggestsTheClosest) {
  EXPECT_THAT(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - center_crop: {size: 224, szie: 3}
)"),
              StartsWith("stoker.yaml:6:32: unknown key 'szie' in arguments "
                         "of op 'center_crop' in pipeline 'train' (did you "
                         "mean 'size'?); expected one of: "));
}

TEST_F(ConfigErrorTest, ArgumentToOpWithoutArgumentsIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - decode_jpeg: {fast: true}
)"),
            "stoker.yaml:6:21: unknown key 'fast' in arguments of op "
            "'decode_jpeg' in pipeline 'train'; expected no keys");
}

TEST_F(ConfigErrorTest, ScalarValueForOpWithoutScalarArgumentIsRejected) {
  EXPECT_EQ(Error(R"(
listen: {unix: s.sock}
datasets: {d: {path: $D}}
pipelines:
  train:
    - resize: 224
)"),
            "stoker.yaml:6:15: op 'resize' in pipeline 'train' is given '224'; "
            "expected a map of arguments like {size: ...}");
}

}  // namespace
}  // namespace stoker::config
