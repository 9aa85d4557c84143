// Number lists of tf.train.Examples as ndarray values (number_list.h): the
// same values and refusals as the ndarray kind's FromText, without text.
#include "server/dataset/importers/number_list.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/dataset/importers/importers.h"

namespace stoker::dataset {
namespace {

FieldSpec Spec(std::string_view flag) {
  return ParseFieldFlag(flag).value().spec;
}

std::string Int64s(std::string_view flag, std::vector<int64_t> v) {
  absl::StatusOr<std::string> out = Int64sToArray(Spec(flag), v);
  return out.ok() ? *out : out.status().ToString();
}

std::string Floats(std::string_view flag, std::vector<float> v) {
  absl::StatusOr<std::string> out = FloatsToArray(Spec(flag), v);
  return out.ok() ? *out : out.status().ToString();
}

TEST(NumberListTest, ConvertsAsFromTextDoes) {
  for (const char* flag :
       {"t:ndarray:uint8:-1", "t:ndarray:int16:-1", "t:ndarray:int64:-1",
        "t:ndarray:float32:-1", "t:ndarray:float64:-1", "t:ndarray:float16:-1",
        "t:ndarray:bool:-1"}) {
    const FieldSpec spec = Spec(flag);
    EXPECT_EQ(Int64s(flag, {1, 0, 1}), *spec.kind->FromText(spec, "1 0 1"))
        << flag;
    EXPECT_EQ(Floats(flag, {1, 0, 1}), *spec.kind->FromText(spec, "1 0 1"))
        << flag;
  }
  const std::vector<float> f = {0.1f, -2.5e-7f};
  EXPECT_EQ(Floats("t:ndarray:float32:-1", f),
            std::string(reinterpret_cast<const char*>(f.data()), 8));
  EXPECT_EQ(Int64s("t:ndarray:int32:2x2", {1, 2, 3, 4}).size(), 16u);
}

TEST(NumberListTest, RefusesWhatFromTextRefuses) {
  EXPECT_EQ(Int64s("t:ndarray:uint8:-1", {1, 256}),
            "INVALID_ARGUMENT: field 't': element 1 '256' is not a uint8");
  EXPECT_EQ(Int64s("t:ndarray:bool:-1", {2}),
            "INVALID_ARGUMENT: field 't': element 0 '2' is not a bool");
  EXPECT_EQ(Floats("t:ndarray:int32:-1", {1, 1.5f}),
            "INVALID_ARGUMENT: field 't': element 1 '1.5' is not a int32");
  EXPECT_EQ(Floats("t:ndarray:int64:-1", {1e30f}).substr(0, 40),
            "INVALID_ARGUMENT: field 't': element 0 '");
  EXPECT_EQ(Int64s("t:ndarray:int32:-1x2", {1, 2, 3}),
            "INVALID_ARGUMENT: field 't': 3 numbers do not fit int32 [-1, 2]");
}

TEST(NumberListTest, AMillionNumbersMakeOnlyTheirOutput) {
  std::vector<int64_t> v(1 << 20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  absl::StatusOr<std::string> out =
      Int64sToArray(Spec("t:ndarray:int64:-1"), v);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), v.size() * 8);
  EXPECT_EQ(std::memcmp(out->data(), v.data(), out->size()), 0);
}

}  // namespace
}  // namespace stoker::dataset
