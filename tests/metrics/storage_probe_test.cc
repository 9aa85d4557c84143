#include "server/metrics/storage_probe.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/status_matchers.h"
#include "tests/testing/dataset_fixture.h"

namespace stoker::metrics {
namespace {

namespace fs = std::filesystem;
using ::stoker::pipeline::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kNfs = 0x6969;
constexpr int64_t kCeph = 0x00C36400;
constexpr int64_t kFuse = 0x65735546;
constexpr int64_t kCifs = 0xFF534D42;
constexpr int64_t kLustre = 0x0BD00BD0;
constexpr int64_t kExt4 = 0xEF53;

// Writes `text` to `path`, making the folders above it.
void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// A fake sysfs: /sys/dev/block/MAJ:MIN links into /sys/devices like the
// kernel's, so the probe follows partitions and slaves as it does for real.
class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& root) : root_(root) {}
  // A disk at devices/<bus>/block/<name>, with its rotational flag.
  fs::path Disk(const std::string& bus, const std::string& name,
                const std::string& dev, int rotational) {
    const fs::path dir = root_ / "devices" / bus / "block" / name;
    Write(dir / "queue" / "rotational", std::to_string(rotational));
    Link(dev, dir);
    return dir;
  }
  fs::path Partition(const fs::path& disk, const std::string& name,
                     const std::string& dev) {
    const fs::path dir = disk / name;
    Write(dir / "partition", "1");
    Link(dev, dir);
    return dir;
  }
  // A device-mapper device over `below`.
  fs::path Mapper(const std::string& name, const std::string& dev,
                  const std::vector<fs::path>& below, int own_rotational) {
    const fs::path dir = root_ / "devices" / "virtual" / "block" / name;
    Write(dir / "queue" / "rotational", std::to_string(own_rotational));
    fs::create_directories(dir / "slaves");
    for (const fs::path& b : below) {
      fs::create_directory_symlink(b, dir / "slaves" / b.filename());
    }
    Link(dev, dir);
    return dir;
  }

 private:
  void Link(const std::string& dev, const fs::path& target) {
    const fs::path link = root_ / "dev" / "block" / dev;
    fs::create_directories(link.parent_path());
    fs::create_directory_symlink(fs::relative(target, link.parent_path()),
                                 link);
  }
  fs::path root_;
};

TEST(StorageProbeTest, TmpfsIsLocal) {
  struct statfs sfs;
  if (statfs("/dev/shm", &sfs) != 0 || sfs.f_type != 0x01021994) {
    GTEST_SKIP() << "no tmpfs at /dev/shm on this machine";
  }
  auto d = DiagnoseStorage("train", "/dev/shm");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fstype, "tmpfs");
  EXPECT_EQ(d->kind, StorageKind::kLocal);
  EXPECT_EQ(d->device, "");
  EXPECT_EQ(d->advice, "");
}

TEST(StorageProbeTest, TempDirOnLocalDiskIsNotNetwork) {
  testing::ScopedTempDir tmp;
  auto d = DiagnoseStorage("train", tmp.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE(d->kind, StorageKind::kNetwork) << d->fstype;
  EXPECT_FALSE(d->fstype.empty());
}

TEST(StorageProbeTest, InjectedNetworkFilesystemsAreNetworkWithAdvice) {
  testing::ScopedTempDir tmp;
  const std::pair<int64_t, const char*> cases[] = {{kNfs, "nfs"},
                                                   {kCeph, "ceph"},
                                                   {kFuse, "fuse"},
                                                   {kCifs, "cifs"},
                                                   {kLustre, "lustre"}};
  for (const auto& [magic, name] : cases) {
    StorageProbeOptions o;
    o.fs_type = magic;
    auto d = DiagnoseStorage("train", tmp.path(), o);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->fstype, name);
    EXPECT_EQ(d->kind, StorageKind::kNetwork) << name;
    EXPECT_STREQ(StorageKindName(d->kind), "network");
    EXPECT_THAT(d->advice, HasSubstr("local SSD"));
    EXPECT_THAT(d->advice, HasSubstr("datasets.train.path"));
  }
}

TEST(StorageProbeTest, SignExtendedMagicIsRecognised) {
  // statfs's f_type is a signed word on some ABIs.
  EXPECT_EQ(FsTypeName(static_cast<int32_t>(0xFF534D42)), "cifs");
  EXPECT_TRUE(IsNetworkFsType(static_cast<int32_t>(0xFF534D42)));
  EXPECT_FALSE(IsNetworkFsType(kExt4));
  EXPECT_EQ(FsTypeName(0x12345), std::nullopt);
}

TEST(StorageProbeTest, UnknownMagicIsNamedInHexAndLocal) {
  testing::ScopedTempDir tmp;
  StorageProbeOptions o;
  o.fs_type = 0x1234ABCD;
  o.sys_root = tmp.path() + "/no-sys";
  auto d = DiagnoseStorage("train", tmp.path(), o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fstype, "0x1234abcd");
  EXPECT_EQ(d->kind, StorageKind::kLocal);
}

TEST(StorageProbeTest, MissingPathIsNotFound) {
  EXPECT_THAT(DiagnoseStorage("train", "/no/such/dataset"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("train")));
}

TEST(StorageProbeTest, PartitionFollowsItsDisk) {
  testing::ScopedTempDir tmp;
  FakeSysfs sys(tmp.path());
  const fs::path hdd = sys.Disk("pci0000:00/ata1", "sda", "8:0", 1);
  sys.Partition(hdd, "sda1", "8:1");
  const fs::path ssd = sys.Disk("pci0000:00/nvme0", "nvme0n1", "259:0", 0);
  sys.Partition(ssd, "nvme0n1p1", "259:1");
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 8, 1), true);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 8, 0), true);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 259, 1), false);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 9, 9), std::nullopt);
}

TEST(StorageProbeTest, MapperIsRotationalIfAnyDiskBelowIs) {
  testing::ScopedTempDir tmp;
  FakeSysfs sys(tmp.path());
  const fs::path hdd = sys.Disk("ata1", "sda", "8:0", 1);
  const fs::path ssd = sys.Disk("nvme0", "nvme0n1", "259:0", 0);
  const fs::path ssd2 = sys.Disk("nvme1", "nvme1n1", "259:2", 0);
  // The mapper's own flag is derived by the kernel: it is not read.
  sys.Mapper("dm-0", "253:0", {sys.Partition(hdd, "sda2", "8:2"), ssd}, 0);
  sys.Mapper("dm-1", "253:1", {ssd, ssd2}, 1);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 253, 0), true);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 253, 1), false);
}

TEST(StorageProbeTest, VirtualDisksAreNotBelieved) {
  testing::ScopedTempDir tmp;
  FakeSysfs sys(tmp.path());
  sys.Disk("pci0000:00/0000:00:02.0/virtio1", "vda", "254:0", 1);
  const fs::path sdb = sys.Disk("pci0000:00/host0", "sdb", "8:16", 1);
  Write(sdb / "device" / "vendor", "VMware  ");
  const fs::path sdc = sys.Disk("pci0000:00/host1", "sdc", "8:32", 1);
  Write(sdc / "device" / "vendor", "ATA     ");
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 254, 0), std::nullopt);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 8, 16), std::nullopt);
  EXPECT_EQ(IsRotationalDevice(tmp.path(), 8, 32), true);
}

TEST(StorageProbeTest, DatasetOnASpinningDiskIsRotationalWithAdvice) {
  // The dataset's real device, described by a fake sysfs as a spinning disk.
  testing::ScopedTempDir tmp;
  struct stat st;
  ASSERT_EQ(stat(tmp.path().c_str(), &st), 0);
  if (major(st.st_dev) == 0) {
    GTEST_SKIP() << "the temp dir has no block device (tmpfs, overlay)";
  }
  FakeSysfs sys(tmp.path() + "/sys");
  sys.Disk(
      "ata1", "sdz",
      std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)),
      1);
  StorageProbeOptions o;
  o.fs_type = kExt4;
  o.sys_root = tmp.path() + "/sys";
  o.mounts = tmp.path() + "/no-mounts";
  auto d = DiagnoseStorage("train", tmp.path(), o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fstype, "ext4");
  EXPECT_EQ(d->kind, StorageKind::kRotational);
  EXPECT_THAT(d->advice, HasSubstr("spinning disk"));
  EXPECT_THAT(d->advice, HasSubstr("local SSD"));
}

TEST(StorageProbeTest, MountTableGivesFinerNamesAndFuseblkIsLocal) {
  testing::ScopedTempDir tmp;
  const std::string data = tmp.path() + "/my data";
  fs::create_directories(data);
  std::string escaped = data;
  escaped.replace(escaped.find(' '), 1, "\\040");
  Write(tmp.path() + "/mounts",
        "/dev/vda / ext4 rw 0 0\n"
        "server:/export " +
            escaped + " nfs4 rw 0 0\n");
  StorageProbeOptions o;
  o.mounts = tmp.path() + "/mounts";
  // The name comes from the table (statfs says only "nfs"); the kind still
  // comes from statfs's f_type.
  auto d = DiagnoseStorage("train", data, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fstype, "nfs4");

  Write(tmp.path() + "/mounts2", "/dev/sdb1 " + escaped + " fuseblk rw 0 0\n");
  o.mounts = tmp.path() + "/mounts2";
  o.fs_type = kFuse;
  d = DiagnoseStorage("train", data, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, StorageKind::kLocal);  // ntfs-3g on a local disk.
}

}  // namespace
}  // namespace stoker::metrics
