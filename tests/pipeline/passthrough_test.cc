// Pass-through of the fields no op binds (passthrough.h): dense values are
// copied as they are, ragged ones into a values slot with their count in
// the offsets slot, and the fields ops choose and size them.
#include "server/pipeline/passthrough.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "tests/pipeline/status_matchers.h"

namespace stoker::pipeline {
namespace {

using ::stoker::pipeline::testing::IsOk;
using ::stoker::pipeline::testing::StatusIs;
using tensor::DType;
using tensor::OutputSlot;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Names = std::vector<std::string>;

OpConfig Op(std::string name, OpArgs args = {}, int line = 0) {
  return {std::move(name), std::move(args), line};
}

OpConfig Limit(const std::string& field, int64_t max_length,
               const std::string& overflow) {
  return Op(
      "ragged_limit",
      {{"field", field}, {"max_length", max_length}, {"overflow", overflow}});
}

InputField Ragged(std::string name, DType dtype, std::vector<int64_t> shape,
                  uint64_t max_length) {
  InputField field =
      InputField::Dense(std::move(name), dtype, std::move(shape));
  field.passthrough = InputField::Passthrough::kRaggedRows;
  field.max_length = max_length;
  return field;
}

InputField Text(std::string name, uint64_t max_length) {
  InputField field = InputField::Dense(std::move(name), DType::kUint8, {-1});
  field.passthrough = InputField::Passthrough::kRaggedBytes;
  field.utf8 = true;
  field.max_length = max_length;
  return field;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

std::unique_ptr<BoundPipeline> MustBind(const std::vector<OpConfig>& ops,
                                        const std::vector<InputField>& schema) {
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create("p", ops);
  EXPECT_THAT(pipeline, IsOk());
  absl::StatusOr<std::unique_ptr<BoundPipeline>> bound =
      (*pipeline)->Bind(schema);
  EXPECT_THAT(bound, IsOk());
  return *std::move(bound);
}

// Runs `bound` on `record` into one buffer per slot of its room; returns the
// buffers.
absl::StatusOr<std::vector<std::string>> RunSample(
    const BoundPipeline& bound, const std::vector<std::string>& record) {
  std::vector<std::string> out;
  for (const OutputSlot& slot : bound.slots()) {
    out.emplace_back(slot.max_sample_bytes, '\xee');
  }
  std::vector<uint8_t*> dst;
  for (std::string& o : out)
    dst.push_back(reinterpret_cast<uint8_t*>(o.data()));
  const std::vector<std::string_view> fields(record.begin(), record.end());
  SampleRng rng(1, 2, 3);
  if (absl::Status s = bound.Run(fields, rng, dst, nullptr); !s.ok()) return s;
  return out;
}

int64_t Count(const std::string& slot) {
  int64_t count = 0;
  std::memcpy(&count, slot.data(), 8);
  return count;
}

const std::vector<InputField> kDense = {
    InputField::Dense("score", DType::kFloat32),
    InputField::Dense("weight", DType::kFloat64),
    InputField::Dense("label", DType::kInt64),
    InputField::Dense("patch", DType::kUint16, {2, 3}),
    InputField::Dense("unused", DType::kInt64)};

TEST(PassthroughTest, DenseFieldsArriveAsTheirBytesWithTheirShapes) {
  const auto bound =
      MustBind({Op("drop_fields", {{"value", Names{"unused"}}})}, kDense);
  const std::vector<tensor::TensorSpec>& out = bound->outputs();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].name, "score");
  EXPECT_EQ(out[0].dtype, DType::kFloat32);
  EXPECT_TRUE(out[0].shape.empty());
  EXPECT_EQ(out[1].dtype, DType::kFloat64);
  EXPECT_EQ(out[2].dtype, DType::kInt64);
  EXPECT_EQ(out[3].name, "patch");
  EXPECT_THAT(out[3].shape, ElementsAre(2, 3));
  const std::vector<std::string> record = {
      Bytes<float>({1.5f}), Bytes<double>({-2.25}), Bytes<int64_t>({-7}),
      Bytes<uint16_t>({1, 2, 3, 4, 5, 65535}), Bytes<int64_t>({9})};
  absl::StatusOr<std::vector<std::string>> got = RunSample(*bound, record);
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(*got, ElementsAre(record[0], record[1], record[2], record[3]));
}

TEST(PassthroughTest, ADenseValueOfTheWrongSizeIsDataLoss) {
  const auto bound =
      MustBind({Op("drop_fields", {{"value", Names{"unused"}}})}, kDense);
  EXPECT_THAT(
      RunSample(*bound, {Bytes<float>({1.5f}), "short", Bytes<int64_t>({1}),
                         std::string(12, '\0'), ""})
          .status(),
      StatusIs(absl::StatusCode::kDataLoss,
               "field 'weight' has 5 bytes, not 8"));
}

TEST(PassthroughTest, RaggedFieldsGetValuesAndOffsetsSlots) {
  const auto bound = MustBind(
      {Limit("tokens", 3, "fail")},
      {Ragged("boxes", DType::kFloat32, {-1, 4}, 2),
       Ragged("tokens", DType::kInt32, {-1}, 100), Text("caption", 8)});
  const std::vector<OutputSlot>& slots = bound->slots();
  ASSERT_EQ(slots.size(), 6u);
  EXPECT_EQ(slots[0].kind, OutputSlot::Kind::kRagged);
  EXPECT_THAT(slots[0].spec.shape, ElementsAre(-1, 4));
  EXPECT_EQ(slots[0].row_bytes, 16u);
  EXPECT_EQ(slots[0].max_sample_bytes, 32u);  // The manifest's 2 rows.
  EXPECT_EQ(slots[1].kind, OutputSlot::Kind::kOffsets);
  EXPECT_EQ(slots[1].spec.name, "boxes.offsets");
  EXPECT_EQ(slots[1].spec.offsets_for, "boxes");
  EXPECT_EQ(slots[1].values_slot, 0);
  EXPECT_EQ(slots[2].max_sample_bytes, 12u);  // ragged_limit's 3 rows.
  EXPECT_TRUE(slots[4].spec.utf8);
  EXPECT_EQ(slots[4].max_sample_bytes, 8u);
  EXPECT_EQ(slots[5].spec.name, "caption.offsets");

  const std::string boxes = Bytes<float>({1, 2, 3, 4, 5, 6, 7, 8});
  const std::string tokens = Bytes<int32_t>({7, -1});
  absl::StatusOr<std::vector<std::string>> got =
      RunSample(*bound, {boxes, tokens, "héllo"});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0], boxes);
  EXPECT_EQ(Count((*got)[1]), 2);
  EXPECT_EQ((*got)[2].substr(0, 8), tokens);
  EXPECT_EQ(Count((*got)[3]), 2);
  EXPECT_EQ((*got)[4].substr(0, 6), "héllo");
  EXPECT_EQ(Count((*got)[5]), 6);
  got = RunSample(*bound, {"", "", ""});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Count((*got)[1]), 0);
  EXPECT_EQ(Count((*got)[3]), 0);
  EXPECT_EQ(Count((*got)[5]), 0);
}

TEST(PassthroughTest, OverflowTruncatesSkipsOrFailsAsTheLimitSays) {
  const std::vector<InputField> schema = {
      Ragged("tokens", DType::kInt32, {-1}, 100)};
  const std::string five = Bytes<int32_t>({1, 2, 3, 4, 5});
  const auto truncate = MustBind({Limit("tokens", 3, "truncate")}, schema);
  absl::StatusOr<std::vector<std::string>> got = RunSample(*truncate, {five});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0], five.substr(0, 12));
  EXPECT_EQ(Count((*got)[1]), 3);

  const auto skip = MustBind({Limit("tokens", 3, "skip")}, schema);
  absl::Status s = RunSample(*skip, {five}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                          HasSubstr("field 'tokens' has 5 rows, over its "
                                    "ragged_limit max_length 3")));
  EXPECT_EQ(RaggedOverflowOf(s), RaggedOverflow::kSkip);
  EXPECT_THAT(RunSample(*skip, {Bytes<int32_t>({1, 2, 3})}), IsOk());

  const auto fail = MustBind({Limit("tokens", 3, "fail")}, schema);
  s = RunSample(*fail, {five}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                          HasSubstr("overflow: fail")));
  EXPECT_EQ(RaggedOverflowOf(s), RaggedOverflow::kFail);
  EXPECT_EQ(RaggedOverflowOf(absl::DataLossError("x")), std::nullopt);
}

TEST(PassthroughTest, TruncateCutsAStrAtACharacterBoundary) {
  const auto bound = MustBind({Limit("caption", 4, "truncate")},
                              {Text("caption", 100)});
  // "aé€😀": 1, 2, 3 and 4 bytes. A cut after 4 bytes falls inside the euro
  // sign; the str keeps "aé" (3 bytes), never half a character.
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  absl::StatusOr<std::vector<std::string>> got = RunSample(*bound, {text});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Count((*got)[1]), 3);
  EXPECT_EQ((*got)[0].substr(0, 3), "a\xc3\xa9");

  // A limit that ends on a boundary keeps every byte it allows.
  const auto six = MustBind({Limit("caption", 6, "truncate")},
                              {Text("caption", 100)});
  got = RunSample(*six, {text});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Count((*got)[1]), 6);

  // A bytes field is cut where the limit says.
  InputField raw = Text("blob", 100);
  raw.utf8 = false;
  const auto bytes = MustBind({Limit("blob", 4, "truncate")}, {raw});
  got = RunSample(*bytes, {text});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Count((*got)[1]), 4);
}

TEST(PassthroughTest, AnImageWithoutDecodeImagePassesThroughAsBytes) {
  const auto bound = MustBind({Op("drop_fields", {{"value", Names{"label"}}})},
                              {InputField::Image("image", 16),
                               InputField::Dense("label", DType::kInt64)});
  ASSERT_EQ(bound->outputs().size(), 2u);
  EXPECT_EQ(bound->outputs()[0].name, "image");
  EXPECT_EQ(bound->outputs()[1].offsets_for, "image");
  absl::StatusOr<std::vector<std::string>> got =
      RunSample(*bound, {"\xff\xd8 jpeg", Bytes<int64_t>({3})});
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Count((*got)[1]), 7);
}

TEST(PassthroughTest, BindRefusesARaggedFieldWithNoMaxLength) {
  auto pipeline =
      Pipeline::Create("p", {Op("drop_fields", {{"value", Names{}}})});
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_THAT((*pipeline)->Bind({Ragged("tokens", DType::kInt32, {-1}, 0)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("field 'tokens' is ragged"),
                             HasSubstr("no max_length"),
                             HasSubstr("ragged_limit: {field: tokens"))));
}

TEST(PassthroughTest, BindNamesTheOpAndLineOfAnUnknownField) {
  auto pipeline = Pipeline::Create(
      "p", {Op("drop_fields", {{"value", Names{"captoin"}}}, 7)});
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_THAT(
      (*pipeline)->Bind(kDense),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("op[0] 'drop_fields' (line 7)"),
                     HasSubstr("field 'captoin' is not in the dataset"),
                     HasSubstr("score, weight, label, patch, unused"))));
  pipeline = Pipeline::Create(
      "p",
      {Op("ragged_limit",
          {{"field", std::string("label")}, {"max_length", int64_t{4}}}, 9)});
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_THAT((*pipeline)->Bind(kDense),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("(line 9)"),
                             HasSubstr("field 'label' has a fixed size"))));
}

TEST(PassthroughTest, APipelineWithoutDecodeTakesOnlyFieldsOps) {
  EXPECT_THAT(
      Pipeline::Create(
          "p", {Op("drop_fields", {{"value", Names{}}}), Op("random_flip")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("a pipeline without decode_image passes its fields "
                         "through")));
  EXPECT_THAT(
      Pipeline::Create(
          "p", {Op("decode_image"), Op("drop_fields", {{"value", Names{}}}),
                Op("center_crop", {{"size", int64_t{8}}})}),
      IsOk());
}

}  // namespace
}  // namespace stoker::pipeline
