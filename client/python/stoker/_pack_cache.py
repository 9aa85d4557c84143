"""ImageFolders packed on first use, for the one-line Loader.

A folder given as a Loader's dataset is either a packed dataset (it has a
manifest.json, written by `stoker pack`) or an ImageFolder (CLASS/IMAGE
files). An ImageFolder is packed once into the cache, ``$STOKER_CACHE`` or
``~/.cache/stoker``, as ``packs/<folder name>-<path digest>-<content
digest>``: the content digest covers the relative path, size and mtime of
every file `stoker pack` reads, so the folder is packed again only when one
of them changes, and the older pack of the same folder is then removed. Two
trainers that ask at once pack it once: the second waits on a lock.

A pack URL (``s3://BUCKET/PREFIX``, ``http(s)://HOST/PATH``) is pulled
once into ``pulled/<last part>-<URL digest>`` with `stoker pull`, which
checks every shard and writes the manifest last; a later start runs the
pull again, which reads the source's manifest and fetches nothing when the
copy is complete (and resumes a copy that was cut short).
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO, Callable, Iterator, List, Sequence, Tuple

MANIFEST = "manifest.json"
# What `stoker pack` decodes (docs: image formats); a folder with none of
# these is not an ImageFolder.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff")
# The sources `stoker pull` reads (docs/storage.md).
URL_SCHEMES = ("s3://", "http://", "https://")


def is_url(dataset: str) -> bool:
    """True if `dataset` is a pack URL rather than a folder or a name."""
    return dataset.startswith(URL_SCHEMES)


def cache_root() -> Path:
    """$STOKER_CACHE, else ~/.cache/stoker."""
    env = os.environ.get("STOKER_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "stoker"


def _source_files(folder: Path) -> Iterator[Tuple[str, os.stat_result]]:
    """(relative path, stat) of each file `stoker pack` reads from the
    ImageFolder `folder`: every non-hidden file under a non-hidden class
    folder, in a fixed order."""
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if Path(top) == folder:
            continue  # Files beside the class folders are not samples.
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(top, name)
            yield os.path.relpath(path, folder), os.stat(path)


def folder_digest(folder: Path) -> Tuple[str, int]:
    """(digest of the folder's files, number of images among them)."""
    digest = hashlib.sha256()
    images = 0
    for rel, st in _source_files(folder):
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        if rel.lower().endswith(IMAGE_SUFFIXES):
            images += 1
    return digest.hexdigest()[:16], images


def packed_folder(folder: Path, stoker_cli: Callable[[], str]) -> Path:
    """The packed dataset for `folder`: itself if packed, else its pack in
    the cache (made now if missing or out of date, with pack's progress on
    stderr, by the `stoker` that stoker_cli() finds). ValueError for a folder that has no images;
    PermissionError for a cache that cannot be written; RuntimeError if
    `stoker pack` fails."""
    if (folder / MANIFEST).is_file():
        return folder
    digest, images = folder_digest(folder)
    if images == 0:
        raise ValueError(
            f"dataset folder {folder} has no images (no "
            f"{'/'.join(s[1:] for s in IMAGE_SUFFIXES)} files in class "
            f"folders) and no {MANIFEST}: expected an ImageFolder "
            f"(CLASS/IMAGE.jpg) or a dataset written by `stoker pack`")
    root = cache_root()
    packs = root / "packs"
    source = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    prefix = f"{folder.name}-{source}-"
    target = packs / (prefix + digest)
    lock = _open_lock(packs, prefix + "lock", f"to pack the ImageFolder "
                      f"{folder}", f"pack it yourself (stoker pack {folder} "
                      f"DST)")
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / MANIFEST).is_file():
            _pack(folder, target, stoker_cli(), images)
        for old in packs.glob(prefix + "*"):
            if old != target and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    return target


def pulled_folder(url: str, stoker_cli: Callable[[], str]) -> Path:
    """The local copy of the pack at `url`, pulled into the cache now if it
    is missing or incomplete (with pull's progress on stderr).
    PermissionError for a cache that cannot be written; RuntimeError if
    `stoker pull` fails."""
    root = cache_root() / "pulled"
    name = url.rstrip("/").rsplit("/", 1)[-1] or "dataset"
    prefix = f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:16]}"
    target = root / prefix
    lock = _open_lock(root, prefix + ".lock", f"to pull {url}",
                      f"pull it yourself (stoker pull {url} DST)")
    with lock:
        # Two trainers that start at once pull once: `stoker pull` refuses a
        # second pull of one DEST, so the second waits here instead.
        fcntl.flock(lock, fcntl.LOCK_EX)
        print(f"stoker: pulling {url} into {target} (once; a complete copy "
              f"is only checked against the source's manifest)",
              file=sys.stderr, flush=True)
        _run([stoker_cli(), "pull", url, str(target)],
             f"`stoker pull {url} {target}`",
             "check the URL and the credentials (docs/storage.md), then try "
             "again: a pull resumes where it stopped")
    return target


def _open_lock(folder: Path, name: str, why: str, instead: str) -> IO[str]:
    """folder/name opened for an flock, the folder made if missing.
    PermissionError saying what to do if the cache cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return open(folder / name, "a")
    except OSError as e:
        raise PermissionError(
            f"cannot write the cache {folder} ({why}): {e.strerror}; set "
            f"$STOKER_CACHE to a writable folder, or {instead} and pass DST "
            f"as the dataset") from None


def _show(chunk: bytes) -> None:
    """Writes pack's output to stderr as it comes (a notebook's stderr
    has no byte buffer)."""
    buffer = getattr(sys.stderr, "buffer", None)
    if buffer is not None:
        buffer.write(chunk)
    else:
        sys.stderr.write(chunk.decode(errors="replace"))
    sys.stderr.flush()


def _pack(folder: Path, target: Path, stoker_cli: str, images: int) -> None:
    """Runs `stoker pack folder target`, its progress passed on to stderr."""
    print(f"stoker: packing the ImageFolder {folder} ({images} images) into "
          f"{target}, once", file=sys.stderr, flush=True)
    _run([stoker_cli, "pack", str(folder), str(target), "--force"],
         f"`stoker pack {folder} {target}`",
         "fix the folder (or pack it yourself with --on-error skip) and try "
         "again")


def _run(argv: Sequence[str], what: str, advice: str) -> None:
    """Runs argv, its output passed on to stderr as it comes. RuntimeError
    naming `what`, its exit code and last line, and `advice` if it fails."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    tail: List[bytes] = []
    try:
        while True:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            _show(chunk)
            tail = (tail + [chunk])[-8:]
    finally:
        code = proc.wait()
        proc.stdout.close()
    if code != 0:
        said = b"".join(tail).decode(errors="replace").strip()
        said = said.replace("\r", "\n").splitlines()[-1] if said else ""
        raise RuntimeError(f"{what} failed (exit {code}): {said}; {advice}")
