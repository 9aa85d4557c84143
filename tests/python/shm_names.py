"""What a process could leave behind in /dev/shm: the names it holds.

A check of "nothing left behind" must look only at what the process under
test could have left, not at the whole of /dev/shm: tests running beside it
(pytest -n 2) and other programs on the machine create and remove their own
entries there (multiprocessing's `sem.mp-*`, for one) at any moment.

A process can leave a name in /dev/shm only by creating it (shm_open, or
open under /dev/shm), and while it lives such a name is among its open
descriptors or its mappings. So: read the names a process holds just before
it is killed, and after, check which of them still exist.
"""
import os
from typing import Set

DEV_SHM = "/dev/shm"


def held_shm_names(pid: int) -> Set[str]:
    """Paths under /dev/shm that process `pid` has open or mapped now, and
    that still have a name (an unlinked one cannot be left behind)."""
    held = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            held.add(os.readlink(f"{fd_dir}/{fd}"))
        except FileNotFoundError:
            pass  # Closed while we looked.
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6:
                held.add(fields[5].rstrip("\n"))
    return {path for path in held
            if path.startswith(DEV_SHM + "/") and
            not path.endswith(" (deleted)")}


def left_behind(held: Set[str]) -> Set[str]:
    """Those of `held` (from held_shm_names) that still exist."""
    return {path for path in held if os.path.lexists(path)}
