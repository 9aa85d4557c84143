// Pins the C++ dtypes to the stoker.v1 DType enum: the table the daemon and
// the C++ client share (proto/dtype_table.h), server/tensor (and the
// server's wire conversion), and the C++ client. The Python client derives
// its table from the enum's names, and tests/python/test_client_dtypes.py
// checks it against the shared table.
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/lib/internal.h"
#include "gtest/gtest.h"
#include "proto/dtype_table.h"
#include "server/tensor/dtype.h"
#include "server/transport/wire.h"
#include "stoker/client.h"
#include "stoker/v1/stoker.pb.h"

namespace stoker {
namespace {

// "float32" for DTYPE_FLOAT32.
std::string NameOf(v1::DType value) {
  const std::string proto = v1::DType_Name(value);
  EXPECT_EQ(proto.rfind("DTYPE_", 0), 0u) << proto;
  return absl::AsciiStrToLower(proto.substr(6));
}

TEST(DTypePinTest, TheSharedTableHasOneRowPerEnumValueUnderItsName) {
  std::set<int> rows;
  for (const wire::DTypeRow& row : wire::kDTypeTable) {
    ASSERT_TRUE(v1::DType_IsValid(row.wire)) << row.name;
    const auto value = static_cast<v1::DType>(row.wire);
    ASSERT_NE(value, v1::DTYPE_UNSPECIFIED) << row.name;
    EXPECT_EQ(NameOf(value), row.name);
    EXPECT_TRUE(rows.insert(row.wire).second) << row.name;
    EXPECT_EQ(wire::FindDTypeRow(row.wire), &row);
  }
  const auto* descriptor = v1::DType_descriptor();
  EXPECT_EQ(rows.size() + 1, static_cast<size_t>(descriptor->value_count()));
  EXPECT_EQ(wire::FindDTypeRow(v1::DTYPE_UNSPECIFIED), nullptr);
}

TEST(DTypePinTest, TheServerSendsEveryDTypeUnderItsName) {
  std::set<int> sent;
  for (tensor::DType t : tensor::kAllDTypes) {
    const v1::DType value = transport::ToProto(t);
    ASSERT_NE(value, v1::DTYPE_UNSPECIFIED)
        << tensor::DTypeName(t) << " is not in the proto";
    EXPECT_EQ(NameOf(value), tensor::DTypeName(t));
    EXPECT_TRUE(sent.insert(value).second);
  }
  // Every value of the enum but UNSPECIFIED is a server dtype.
  const auto* descriptor = v1::DType_descriptor();
  EXPECT_EQ(sent.size() + 1, static_cast<size_t>(descriptor->value_count()));
}

TEST(DTypePinTest, TheClientReadsEveryProtoDTypeWithTheServersNameAndSize) {
  const auto* descriptor = v1::DType_descriptor();
  std::set<DType> seen;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const auto value = static_cast<v1::DType>(descriptor->value(i)->number());
    if (value == v1::DTYPE_UNSPECIFIED) {
      EXPECT_EQ(FromProto(value), DType::kUnknown);
      continue;
    }
    const std::string name = NameOf(value);
    const DType client = FromProto(value);
    ASSERT_NE(client, DType::kUnknown) << name << " is unknown to the client";
    EXPECT_EQ(DTypeName(client), name);
    const std::optional<tensor::DType> server = tensor::DTypeFromName(name);
    ASSERT_TRUE(server.has_value()) << name << " is unknown to the server";
    EXPECT_EQ(DTypeSize(client), tensor::DTypeSize(*server)) << name;
    EXPECT_TRUE(seen.insert(client).second) << name;
  }
  // And the client has no dtype the proto lacks: kUnknown, then one per
  // value, up to kBool, the last.
  EXPECT_EQ(seen.size(), static_cast<size_t>(DType::kBool));
  EXPECT_EQ(DTypeName(DType::kUnknown), "unknown");
  EXPECT_EQ(DTypeSize(DType::kUnknown), 0u);
}

}  // namespace
}  // namespace stoker
