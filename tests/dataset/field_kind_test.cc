#include "server/dataset/field_kind.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;

class TestKind final : public FieldKind {
 public:
  explicit TestKind(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Passthrough passthrough(const FieldSpec&) const override {
    return Passthrough::kDense;
  }
  absl::Status CheckSpec(FieldSpec*) const override { return absl::OkStatus(); }
  absl::Status CheckValue(const FieldSpec&, std::string_view) const override {
    return absl::OkStatus();
  }

 private:
  const std::string name_;
};

TEST(FieldKindRegistryTest, TheGlobalRegistryHoldsEveryKind) {
  EXPECT_THAT(FieldKindRegistry::Global().Names(),
              ElementsAre("bytes", "float32", "float64", "image", "int64",
                          "ndarray", "str"));
  EXPECT_EQ(FieldKindRegistry::Global().Find("tensor"), nullptr);
}

TEST(FieldKindRegistryTest, RefusesDuplicatesAndBadNames) {
  FieldKindRegistry registry;
  EXPECT_TRUE(registry.Register(std::make_unique<TestKind>("mask")).ok());
  EXPECT_EQ(registry.Register(std::make_unique<TestKind>("mask")).ToString(),
            "ALREADY_EXISTS: field kind 'mask' is already registered");
  EXPECT_EQ(registry.Register(std::make_unique<TestKind>("Mask")).ToString(),
            "INVALID_ARGUMENT: field kind 'Mask': name must match [a-z0-9_]+");
  EXPECT_EQ(registry.Register(nullptr).ToString(),
            "INVALID_ARGUMENT: null field kind");
  EXPECT_NE(registry.Find("mask"), nullptr);
  EXPECT_THAT(registry.Names(), ElementsAre("mask"));
}

TEST(FieldKindTest, MakeFieldSpecNamesAnUnknownKind) {
  EXPECT_EQ(MakeFieldSpec("x", "tensor").status().ToString(),
            "INVALID_ARGUMENT: unknown field kind 'tensor' (known: bytes, "
            "float32, float64, image, int64, ndarray, str)");
}

}  // namespace
}  // namespace stoker::dataset
