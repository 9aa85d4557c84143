// --field parsing and the kinds' FromText, which the importers call.
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "server/dataset/importers/importers.h"
#include "server/dataset/record.h"

namespace stoker::dataset {
namespace {

std::string Describe(std::string_view flag) {
  absl::StatusOr<FieldFlag> f = ParseFieldFlag(flag);
  if (!f.ok()) return f.status().ToString();
  return DescribeField(f->spec) +
         (f->source == f->spec.name ? "" : " from " + f->source);
}

TEST(FieldFlagTest, ParsesKindsAndArrays) {
  EXPECT_EQ(Describe("label:int64"), "label (int64)");
  EXPECT_EQ(Describe("tokens:ndarray:int32:-1"), "tokens (ndarray int32 [-1])");
  EXPECT_EQ(Describe("boxes:ndarray:float32:-1x4"),
            "boxes (ndarray float32 [-1, 4])");
  EXPECT_EQ(Describe("w:ndarray:float64:"), "w (ndarray float64 [])");
  EXPECT_EQ(Describe("x:ndarray:float32:4x-1"),
            "INVALID_ARGUMENT: --field 'x:ndarray:float32:4x-1': field 'x': "
            "shape: dimension 1 is -1; only the first may vary");
  EXPECT_EQ(Describe("x:ndarray:complex64:-1"),
            "INVALID_ARGUMENT: --field 'x:ndarray:complex64:-1': unknown "
            "dtype 'complex64'; one of " +
                std::string(tensor::DTypeNames()));
  EXPECT_EQ(Describe("x:int64:extra").substr(0, 40),
            "INVALID_ARGUMENT: --field 'x:int64:extra");
  EXPECT_EQ(Describe("label"),
            "INVALID_ARGUMENT: --field 'label': expected NAME[=SOURCE]:KIND "
            "or NAME[=SOURCE]:ndarray:DTYPE:SHAPE");
  EXPECT_EQ(Describe("xmin=image/object/bbox/xmin:ndarray:float32:-1"),
            "xmin (ndarray float32 [-1]) from image/object/bbox/xmin");
}

std::string Resolve(std::vector<std::string_view> flag_texts) {
  std::vector<Column> defaults = {
      {MakeFieldSpec("image", "image").value(), {"jpg", "png"}},
      {MakeFieldSpec("label", "int64").value(), {"cls"}}};
  std::vector<FieldFlag> flags;
  for (std::string_view t : flag_texts) flags.push_back(*ParseFieldFlag(t));
  absl::StatusOr<std::vector<Column>> cols = ResolveColumns(defaults, flags);
  if (!cols.ok()) return cols.status().ToString();
  std::string out;
  for (const Column& c : *cols) {
    out += DescribeField(c.spec) + " <-";
    for (const std::string& s : c.sources) out += " " + s;
    out += "; ";
  }
  return out;
}

TEST(ResolveColumnsTest, FlagsRetypeRenameOrAdd) {
  EXPECT_EQ(Resolve({}), "image (image) <- jpg png; label (int64) <- cls; ");
  EXPECT_EQ(Resolve({"label:float32"}),
            "image (image) <- jpg png; label (float32) <- cls; ");
  EXPECT_EQ(Resolve({"class=cls:int64", "seg=seg.png:image"}),
            "image (image) <- jpg png; class (int64) <- cls; "
            "seg (image) <- seg.png; ");
  EXPECT_EQ(Resolve({"photo=png:image"}),
            "photo (image) <- png; label (int64) <- cls; ");
  EXPECT_EQ(Resolve({"label=txt:str"}),
            "INVALID_ARGUMENT: two fields named 'label' (a --field adds one "
            "unless it names a default field or reads its source)");
}

std::string FromText(std::string_view flag, std::string_view text) {
  const FieldSpec f = ParseFieldFlag(flag).value().spec;
  absl::StatusOr<std::string> v = f.kind->FromText(f, text);
  return v.ok() ? *v : v.status().ToString();
}

TEST(FromTextTest, ScalarsParseTheirText) {
  EXPECT_EQ(FromText("l:int64", " -3 "), EncodeInt64(-3));
  EXPECT_EQ(FromText("l:int64", "1.5"),
            "INVALID_ARGUMENT: field 'l': '1.5' is not an int64");
  const std::string f = FromText("s:float32", "0.25");
  float v = 0;
  ASSERT_EQ(f.size(), 4u);
  std::memcpy(&v, f.data(), 4);
  EXPECT_EQ(v, 0.25f);
  EXPECT_EQ(FromText("s:float64", "x"),
            "INVALID_ARGUMENT: field 's': 'x' is not a float64");
}

TEST(FromTextTest, ArraysTakeNumbersOrJsonArrays) {
  EXPECT_EQ(FromText("t:ndarray:uint8:-1", "[1, 2, 255]"), "\x01\x02\xff");
  EXPECT_EQ(FromText("t:ndarray:int16:-1x2", "[[1, 2], [3, 4]]").size(), 8u);
  EXPECT_EQ(FromText("t:ndarray:uint8:-1", "1 256"),
            "INVALID_ARGUMENT: field 't': element 1 '256' is not a uint8");
  EXPECT_EQ(FromText("t:ndarray:int32:-1x2", "1 2 3"),
            "INVALID_ARGUMENT: field 't': 3 numbers do not fit int32 [-1, 2]");
  EXPECT_EQ(FromText("t:ndarray:bool:2", "1 0"), std::string("\x01\x00", 2));
}

TEST(FromTextTest, BracketsMustNestAsTheShapeDoes) {
  const char kBoxes[] = "b:ndarray:int32:-1x4";
  EXPECT_EQ(FromText(kBoxes, "[[1,2,3,4],[5,6,7,8]]").size(), 32u);
  EXPECT_EQ(FromText(kBoxes, "[]"), "");
  EXPECT_EQ(FromText(kBoxes, "1 2 3 4 5 6 7 8").size(), 32u);  // No brackets.
  // Eight numbers, but not two rows of four: refused, not regrouped.
  EXPECT_EQ(FromText(kBoxes, "[[1,2,3,4,5],[6,7,8]]"),
            "INVALID_ARGUMENT: field 'b': a list at depth 2 holds 5 items "
            "where dimension 1 is 4; int32 [-1, 4] nests 2 lists deep");
  EXPECT_EQ(FromText(kBoxes, "[1,2,3,4,5,6,7,8]"),
            "INVALID_ARGUMENT: field 'b': a number at depth 1; int32 [-1, 4] "
            "nests 2 lists deep");
  EXPECT_EQ(FromText(kBoxes, "[[[1,2,3,4]]]"),
            "INVALID_ARGUMENT: field 'b': a list at depth 3; int32 [-1, 4] "
            "nests 2 lists deep");
  EXPECT_EQ(FromText(kBoxes, "[[1,2,3,4]"),
            "INVALID_ARGUMENT: field 'b': a '[' without its ']'; int32 "
            "[-1, 4] nests 2 lists deep");
  EXPECT_EQ(FromText(kBoxes, "[[1,2,3,4]] 5"),
            "INVALID_ARGUMENT: field 'b': a number at depth 0; int32 "
            "[-1, 4] nests 2 lists deep");
  EXPECT_EQ(FromText("p:ndarray:uint8:2x2", "[[1,2],[3,4],[5,6]]"),
            "INVALID_ARGUMENT: field 'p': a list at depth 1 holds 3 items "
            "where dimension 0 is 2; uint8 [2, 2] nests 2 lists deep");
  // 100,000 nested brackets stop at the first one deeper than the shape.
  const std::string deep =
      std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(FromText(kBoxes, deep),
            "INVALID_ARGUMENT: field 'b': a list at depth 3; int32 [-1, 4] "
            "nests 2 lists deep");
}

TEST(FromTextTest, TextKindsKeepTheTextAndImagesRefuse) {
  EXPECT_EQ(FromText("c:str", "a, b"), "a, b");
  EXPECT_EQ(FromText("b:bytes", "raw"), "raw");
  EXPECT_EQ(FromText("i:image", "x.jpg"),
            "INVALID_ARGUMENT: field 'i': a image value cannot be given as "
            "text");
}

}  // namespace
}  // namespace stoker::dataset
