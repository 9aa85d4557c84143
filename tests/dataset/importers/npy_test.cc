#include "server/dataset/importers/npy.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

// A version 1.0 .npy file of `header` (padded as NumPy pads it) and `data`.
std::string Npy(std::string header, const std::string& data) {
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

TEST(NpyTest, ReadsDTypeShapeAndData) {
  // NpyArray::data views the file's bytes: each file outlives its array.
  const std::string data(2 * 3 * 4, '\x01');
  const std::string f4 = Npy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data);
  absl::StatusOr<NpyArray> a = ParseNpy(f4);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, tensor::DType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->data, data);

  a = ParseNpy(Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (), }",
                   "x"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->shape.empty());
  a = ParseNpy(Npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                   std::string(8, '\0')));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, std::vector<int64_t>{1});
}

TEST(NpyTest, RefusesFortranObjectAndBigEndianArrays) {
  EXPECT_EQ(
      ParseNpy(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, "
                   "2), }",
                   std::string(16, '\0')))
          .status()
          .ToString(),
      "DATA_LOSS: .npy: fortran_order arrays are not supported; save "
      "np.ascontiguousarray(arr)");
  EXPECT_EQ(ParseNpy(Npy("{'descr': '|O', 'fortran_order': False, 'shape': "
                         "(1,), }",
                         std::string(8, '\0')))
                .status()
                .ToString(),
            "DATA_LOSS: .npy: dtype '|O' is not supported (object arrays "
            "hold Python objects)");
  EXPECT_EQ(ParseNpy(Npy("{'descr': '>i4', 'fortran_order': False, 'shape': "
                         "(1,), }",
                         std::string(4, '\0')))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

// The message of ParseNpy's error for a header, or "ok".
std::string HeaderError(const std::string& header, size_t data_bytes) {
  absl::StatusOr<NpyArray> a =
      ParseNpy(Npy(header, std::string(data_bytes, '\0')));
  return a.ok() ? "ok" : std::string(a.status().message());
}

TEST(NpyTest, RefusesARepeatedKeyRatherThanPickOne) {
  // Each of these once read as a C-order little-endian array.
  EXPECT_EQ(HeaderError("{'descr': '<f4', 'fortran_order': False, "
                        "\"fortran_order\": True, 'shape': (2, 2), }",
                        16),
            ".npy: header key 'fortran_order' given twice (again at header "
            "byte 41)");
  EXPECT_EQ(HeaderError("{'descr': '<i4', 'descr': '>i4', 'fortran_order': "
                        "False, 'shape': (2,), }",
                        8),
            ".npy: header key 'descr' given twice (again at header byte 17)");
  EXPECT_EQ(HeaderError("{'descr': '<i4', 'fortran_order': False, 'shape': "
                        "(2,), 'shape': (1,), }",
                        8),
            ".npy: header key 'shape' given twice (again at header byte 56)");
  // Double quotes and no trailing comma are the same dict.
  EXPECT_EQ(HeaderError("{\"descr\": \"<i4\", \"fortran_order\": False, "
                        "\"shape\": (2,)}",
                        8),
            "ok");
}

TEST(NpyTest, RefusesAHeaderThatIsNotExactlyTheThreeKeys) {
  EXPECT_EQ(HeaderError("{'descr': '<i4', 'shape': (2,), }", 8),
            ".npy: no 'fortran_order' in the header");
  EXPECT_THAT(HeaderError("{'descr': '<i4', 'fortran_order': False, 'shape': "
                          "(2,), 'extra': 1}",
                          8),
              ::testing::HasSubstr("unknown header key 'extra'"));
  EXPECT_THAT(HeaderError("{'descr': [('a', '<i4')], 'fortran_order': False, "
                          "'shape': (2,), }",
                          8),
              ::testing::HasSubstr("structured dtypes are not supported"));
  EXPECT_THAT(HeaderError("{'descr': '<i4', 'fortran_order': False, 'shape': "
                          "(-2,), }",
                          8),
              ::testing::HasSubstr("bad shape dimension '-'"));
  EXPECT_THAT(HeaderError("{'descr': '<i4', 'fortran_order': Maybe, 'shape': "
                          "(2,), }",
                          8),
              ::testing::HasSubstr("neither True nor False"));
}

TEST(NpyTest, DataOfTheWrongSizeOrABadMagicIsDataLoss) {
  EXPECT_EQ(ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                         "(2, 4), }",
                         std::string(12, '\0')))
                .status()
                .ToString(),
            "DATA_LOSS: .npy: data is 12 bytes, shape (2, 4) of float32 "
            "needs 32");
  EXPECT_EQ(ParseNpy("PK\x03\x04 not npy").status().ToString(),
            "DATA_LOSS: .npy: not a .npy file (bad magic)");
}

}  // namespace
}  // namespace stoker::dataset
