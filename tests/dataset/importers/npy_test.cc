#include "server/dataset/importers/npy.h"

#include <string>

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
