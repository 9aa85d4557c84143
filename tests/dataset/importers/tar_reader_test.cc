#include "server/dataset/importers/tar_reader.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stoker::dataset {
namespace {

using ::testing::ElementsAre;

// One 512-byte header as tar writes it: octal fields, checksum last.
std::string Header(const std::string& name, uint64_t size, char type = '0',
                   const std::string& prefix = "") {
  std::string h(512, '\0');
  h.replace(0, std::min<size_t>(name.size(), 100), name.substr(0, 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = type;
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(345, prefix.size(), prefix);
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

// A member: header plus data padded to whole blocks.
std::string Member(const std::string& name, const std::string& data,
                   char type = '0', const std::string& prefix = "") {
  std::string m = Header(name, data.size(), type, prefix) + data;
  m.resize((m.size() + 511) / 512 * 512, '\0');
  return m;
}

std::string End() { return std::string(1024, '\0'); }

std::string Names(const TarListing& l) {
  std::string out;
  for (const TarMember& m : l.files) {
    out += m.name + "=" + std::to_string(m.size) + "@" +
           std::to_string(m.offset) + " ";
  }
  return out;
}

TEST(TarReaderTest, ListsUstarFilesWithPrefixAndSkipsFolders) {
  const std::string tar = Member("a/", "", '5') + Member("0001.jpg", "JPEG") +
                          Member("0001.cls", "3", '0', "shard/dir") + End();
  absl::StatusOr<TarListing> l = ListTarBytes(tar);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Names(*l), "0001.jpg=4@1024 shard/dir/0001.cls=1@2048 ");
  EXPECT_EQ(tar.substr(l->files[0].offset, 4), "JPEG");
}

TEST(TarReaderTest, GnuLongNamesAndPaxPathsNameTheNextMember) {
  const std::string long_name = std::string(150, 'k') + ".jpg";
  const std::string pax_path = std::string(130, 'p') + ".cls";
  const std::string record = " path=" + pax_path + "\n";
  const std::string pax =
      std::to_string(record.size() + 3) + record;  // "NNN path=...\n"
  const std::string tar = Member("././@LongLink", long_name + '\0', 'L') +
                          Member("truncated", "x") +
                          Member("PaxHeader", pax, 'x') +
                          Member("short", "yy") + End();
  absl::StatusOr<TarListing> l = ListTarBytes(tar);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->files.size(), 2u);
  EXPECT_EQ(l->files[0].name, long_name);
  EXPECT_EQ(l->files[1].name, pax_path);
  EXPECT_EQ(l->files[1].size, 2u);
}

TEST(TarReaderTest, LinksAreListedAsOthersNotFollowed) {
  const std::string tar = Member("link.jpg", "", '2') + End();
  absl::StatusOr<TarListing> l = ListTarBytes(tar);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->files.empty());
  EXPECT_THAT(l->others, ElementsAre("link.jpg"));
}

TEST(TarReaderTest, ABadChecksumNamesTheHeaderOffset) {
  std::string tar = Member("a.jpg", "data") + Member("b.jpg", "data") + End();
  tar[1024 + 3] ^= 1;  // The second header's name.
  EXPECT_EQ(ListTarBytes(tar).status().ToString(),
            "DATA_LOSS: tar header at byte 1024: checksum mismatch (not a "
            "tar?)");
}

TEST(TarReaderTest, AMemberPastTheEndIsDataLoss) {
  std::string tar = Header("a.jpg", 5000) + std::string(512, 'x');
  EXPECT_EQ(ListTarBytes(tar).status().ToString(),
            "DATA_LOSS: tar header at byte 0: member of 5000 bytes runs past "
            "the end of the archive");
}

TEST(TarReaderTest, AMalformedPaxRecordIsDataLoss) {
  const std::string tar =
      Member("PaxHeader", "99 path=x\n", 'x') + Member("a", "b") + End();
  EXPECT_EQ(ListTarBytes(tar).status().ToString(),
            "DATA_LOSS: tar header at byte 0: malformed pax record");
}

TEST(TarReaderTest, ANegativePaxSizeIsNamed) {
  const std::string tar =
      Member("PaxHeader", "11 size=-1\n", 'x') + Member("a.jpg", "b") + End();
  EXPECT_EQ(ListTarBytes(tar).status().ToString(),
            "DATA_LOSS: tar header at byte 0: pax record size=-1 is not a "
            "number of bytes");
}

TEST(TarReaderTest, AnArchiveWithoutEndBlocksStillLists) {
  absl::StatusOr<TarListing> l = ListTarBytes(Member("a.txt", "hi"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Names(*l), "a.txt=2@512 ");
}

}  // namespace
}  // namespace stoker::dataset
