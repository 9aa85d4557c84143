// Storage diagnosis: where does a dataset live? A dataset on a network
// filesystem (NFS, CephFS, SMB, Lustre, a FUSE mount...) or on a spinning
// disk starves the pipeline of reads however many workers decode; the remedy
// is always the same: copy it to the node's local SSD. stokerd checks every
// dataset when it loads and says so in the log, in a metric and in
// `stoker top`.
//
//   DiagnoseStorage("/ssd/stoker/train")  -> {fstype: "ext4", kind: kLocal}
//   DiagnoseStorage("/mnt/nfs/train")     -> {fstype: "nfs4", kind: kNetwork,
//                                             advice: "... copy it to ..."}
//
// The filesystem type comes from statfs(2)'s f_type (its name from the mount
// table where it has a finer one, e.g. fuse.sshfs); rotation from
// /sys/dev/block/MAJ:MIN/queue/rotational, following a partition to its disk
// and a device-mapper or md device to the disks below it. A hypervisor's
// virtual disk (virtio, Xen, QEMU/VMware/Hyper-V/GCE SCSI) says rotational=1
// whatever backs it, so its flag is not believed: it counts as local. Every
// source can be replaced for tests (StorageProbeOptions).
//
// Thread-safe: plain functions over the filesystem.
#ifndef STOKER_SERVER_METRICS_STORAGE_PROBE_H_
#define STOKER_SERVER_METRICS_STORAGE_PROBE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace stoker::metrics {

enum class StorageKind { kLocal, kNetwork, kRotational };

// "local", "network" or "rotational": the `kind` label of
// stoker_dataset_storage_info.
const char* StorageKindName(StorageKind kind);

struct StorageDiagnosis {
  std::string fstype;  // e.g. "ext4", "tmpfs", "nfs4"; "0x1234abcd" if unknown.
  StorageKind kind = StorageKind::kLocal;
  // The block device (MAJOR:MINOR) the dataset is on, or empty (tmpfs,
  // network filesystems, or a device sysfs does not describe).
  std::string device;
  // What to change, in one sentence; empty when the storage is local.
  std::string advice;
};

struct StorageProbeOptions {
  // Replaces statfs's f_type (tests cover the network branch with it).
  std::optional<int64_t> fs_type;
  // Root of sysfs; a test points it at a fake tree.
  std::string sys_root = "/sys";
  // The mount table, for finer type names and the devices of btrfs and
  // other filesystems with anonymous device numbers.
  std::string mounts = "/proc/self/mounts";
};

// Diagnoses the storage of `path` (a dataset directory). `dataset` names it
// in the advice. NotFound if the path does not exist.
absl::StatusOr<StorageDiagnosis> DiagnoseStorage(
    const std::string& dataset, const std::string& path,
    const StorageProbeOptions& options = {});

// The name of a statfs f_type, e.g. 0x6969 -> "nfs"; nullopt if unknown.
std::optional<std::string_view> FsTypeName(int64_t f_type);
// True for filesystems whose reads cross a network: NFS, SMB/CIFS, CephFS,
// 9p, Lustre, GPFS, BeeGFS, AFS, FUSE (sshfs, s3fs, gcsfuse...) and kin.
bool IsNetworkFsType(int64_t f_type);

// True if the block device `major:minor` (or the disk of a partition, or
// any disk under a device-mapper or md device) is rotational; nullopt if
// sysfs under `sys_root` does not describe it or it is a virtual disk.
std::optional<bool> IsRotationalDevice(const std::string& sys_root,
                                       unsigned major, unsigned minor);

}  // namespace stoker::metrics

#endif  // STOKER_SERVER_METRICS_STORAGE_PROBE_H_
