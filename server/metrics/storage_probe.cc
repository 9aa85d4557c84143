#include "server/metrics/storage_probe.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker::metrics {
namespace {

namespace fs = std::filesystem;

struct FsType {
  int64_t magic;
  const char* name;
  bool network;
};

// statfs(2) and <linux/magic.h>, plus the parallel filesystems that define
// their magic in their own headers.
constexpr FsType kFsTypes[] = {
    // Network and cluster filesystems.
    {0x6969, "nfs", true},
    {0x517B, "smb", true},
    {0xFF534D42, "cifs", true},
    {0xFE534D42, "smb2", true},
    {0x00C36400, "ceph", true},
    {0x65735546, "fuse", true},
    {0x01021997, "9p", true},
    {0x0BD00BD0, "lustre", true},
    {0x47504653, "gpfs", true},
    {0x19830326, "beegfs", true},
    {0x5346414F, "afs", true},
    {0x6B414653, "afs", true},
    {0x73757245, "coda", true},
    {0x564C, "ncp", true},
    {0x7461636F, "ocfs2", true},
    {0x01161970, "gfs2", true},
    {0xAAD7AAEA, "panfs", true},
    {0x20030528, "pvfs2", true},
    // Local filesystems.
    {0xEF53, "ext4", false},
    {0x58465342, "xfs", false},
    {0x9123683E, "btrfs", false},
    {0x01021994, "tmpfs", false},
    {0x858458F6, "ramfs", false},
    {0x794C7630, "overlay", false},
    {0x2FC12FC1, "zfs", false},
    {0xF2F52010, "f2fs", false},
    {0xCA451A4E, "bcachefs", false},
    {0x73717368, "squashfs", false},
    {0x4D44, "vfat", false},
    {0x2011BAB0, "exfat", false},
    {0x5346544E, "ntfs", false},
    {0x9660, "iso9660", false},
    {0x52654973, "reiserfs", false},
    {0x3153464A, "jfs", false},
};

const FsType* FindFsType(int64_t magic) {
  // f_type is a signed word: 0xFF534D42 can arrive sign-extended.
  const int64_t m = magic & 0xFFFFFFFF;
  for (const FsType& t : kFsTypes) {
    if (t.magic == m) return &t;
  }
  return nullptr;
}

// A mount table entry ("/proc/self/mounts" format); fields are octal-escaped.
struct Mount {
  std::string source;
  std::string point;
  std::string type;
};

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out.push_back(static_cast<char>(std::stoi(oct, nullptr, 8)));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

bool UnderMountPoint(const std::string& path, const std::string& point) {
  if (point == "/") return true;
  return path.compare(0, point.size(), point) == 0 &&
         (path.size() == point.size() || path[point.size()] == '/');
}

// The mount that holds `path`: the last of the longest matching points.
std::optional<Mount> FindMount(const std::string& mounts_file,
                               const std::string& path) {
  std::ifstream in(mounts_file);
  std::optional<Mount> best;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Mount m;
    if (!(fields >> m.source >> m.point >> m.type)) continue;
    m.source = Unescape(m.source);
    m.point = Unescape(m.point);
    if (!UnderMountPoint(path, m.point)) continue;
    if (!best.has_value() || m.point.size() >= best->point.size()) best = m;
  }
  return best;
}

std::string ReadLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n')) {
    line.pop_back();
  }
  return line;
}

// A hypervisor's virtual disk reports rotational=1 (virtio-blk, Xen, the
// emulated SCSI disks of QEMU, VMware, Hyper-V, GCE) whatever backs it, so
// its flag says nothing.
bool IsVirtualDisk(const fs::path& disk) {
  const std::string path = disk.string();
  if (path.find("/virtio") != std::string::npos ||
      path.find("/vbd-") != std::string::npos) {
    return true;
  }
  const std::string vendor = ReadLine(disk / "device" / "vendor");
  const std::string model = ReadLine(disk / "device" / "model");
  for (const char* v : {"QEMU", "VMware", "Msft", "Google", "Xen"}) {
    if (vendor.rfind(v, 0) == 0) return true;
  }
  return model.find("Virtual") != std::string::npos;
}

std::optional<bool> ReadRotational(const fs::path& dir, int depth) {
  if (depth > 8) return std::nullopt;
  std::error_code ec;
  // A partition: its disk is the directory above.
  if (fs::exists(dir / "partition", ec)) {
    return ReadRotational(dir.parent_path(), depth + 1);
  }
  // A device-mapper or md device: rotational if any disk below it is. Its
  // own flag is derived from theirs, so it is not read.
  const fs::path slaves = dir / "slaves";
  if (!fs::is_empty(slaves, ec) && !ec) {
    std::optional<bool> any;
    for (const fs::directory_entry& e : fs::directory_iterator(slaves, ec)) {
      const fs::path below = fs::canonical(e.path(), ec);
      if (ec) continue;
      std::optional<bool> r = ReadRotational(below, depth + 1);
      if (r.has_value()) any = any.value_or(false) || *r;
    }
    return any;
  }
  if (IsVirtualDisk(dir)) return std::nullopt;
  std::ifstream rotational(dir / "queue" / "rotational");
  int value = -1;
  if (rotational >> value) return value == 1;
  return std::nullopt;
}

std::string SlowStorageAdvice(const std::string& dataset,
                              const std::string& path,
                              const std::string& what) {
  return absl::StrCat("dataset '", dataset, "' at ", path, " is on ", what,
                      ": copy it to the node's local SSD and point datasets.",
                      dataset, ".path there");
}

}  // namespace

const char* StorageKindName(StorageKind kind) {
  switch (kind) {
    case StorageKind::kLocal:
      return "local";
    case StorageKind::kNetwork:
      return "network";
    case StorageKind::kRotational:
      return "rotational";
  }
  return "local";
}

std::optional<std::string_view> FsTypeName(int64_t f_type) {
  const FsType* t = FindFsType(f_type);
  if (t == nullptr) return std::nullopt;
  return t->name;
}

bool IsNetworkFsType(int64_t f_type) {
  const FsType* t = FindFsType(f_type);
  return t != nullptr && t->network;
}

std::optional<bool> IsRotationalDevice(const std::string& sys_root,
                                       unsigned major, unsigned minor) {
  std::error_code ec;
  const fs::path link =
      fs::path(sys_root) / "dev" / "block" / absl::StrCat(major, ":", minor);
  const fs::path dir = fs::canonical(link, ec);
  if (ec) return std::nullopt;
  return ReadRotational(dir, 0);
}

absl::StatusOr<StorageDiagnosis> DiagnoseStorage(
    const std::string& dataset, const std::string& path,
    const StorageProbeOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("storage of dataset '", dataset,
                                            "': ", path, ": ",
                                            std::strerror(errno)));
  }
  int64_t f_type = 0;
  if (options.fs_type.has_value()) {
    f_type = *options.fs_type;
  } else {
    struct statfs sfs;
    if (statfs(path.c_str(), &sfs) != 0) {
      return absl::InternalError(
          absl::StrCat("statfs ", path, ": ", std::strerror(errno)));
    }
    f_type = static_cast<int64_t>(sfs.f_type);
  }
  std::error_code ec;
  const std::string real = fs::weakly_canonical(path, ec).string();
  const std::optional<Mount> mount =
      FindMount(options.mounts, ec ? path : real);

  StorageDiagnosis d;
  const std::optional<std::string_view> name = FsTypeName(f_type);
  if (!options.fs_type.has_value() && mount.has_value()) {
    d.fstype = mount->type;  // Finer: nfs4, fuse.sshfs, ext3.
  } else if (name.has_value()) {
    d.fstype = std::string(*name);
  } else {
    d.fstype =
        absl::StrFormat("0x%x", static_cast<uint64_t>(f_type) & 0xFFFFFFFFull);
  }
  // fuseblk is FUSE over a local block device (ntfs-3g, exfat-fuse).
  const bool fuse_on_block = mount.has_value() && mount->type == "fuseblk";
  if (IsNetworkFsType(f_type) && !fuse_on_block) {
    d.kind = StorageKind::kNetwork;
    d.advice =
        SlowStorageAdvice(dataset, path,
                          absl::StrCat(d.fstype,
                                       ", a network filesystem, so "
                                       "every read crosses the network"));
    return d;
  }

  // The block device: st_dev, or the mount's source for filesystems that
  // report an anonymous device (btrfs).
  dev_t dev = st.st_dev;
  if (major(dev) == 0 && mount.has_value() &&
      mount->source.rfind("/dev/", 0) == 0) {
    struct stat src;
    if (stat(mount->source.c_str(), &src) == 0 && S_ISBLK(src.st_mode)) {
      dev = src.st_rdev;
    }
  }
  if (major(dev) != 0) {
    d.device = absl::StrCat(major(dev), ":", minor(dev));
    if (IsRotationalDevice(options.sys_root, major(dev), minor(dev)) ==
        std::optional<bool>(true)) {
      d.kind = StorageKind::kRotational;
      d.advice = SlowStorageAdvice(
          dataset, path,
          absl::StrCat("a spinning disk (", d.device,
                       "), so random reads wait for the disk head"));
    }
  }
  return d;
}

}  // namespace stoker::metrics
