"""StagingWatch: while a stream's open waits in the daemon, tells the user
how far the copy of its dataset is, if the daemon is staging it.

The daemon makes an open on a dataset that it is still copying from its
`source` wait (docs/storage.md, "Staging in the daemon") and says nothing
on the call until the wait ends. So the client asks on the side: the same
channel's ListDatasets, whose DatasetInfo.staging is the daemon's own line
for the copy ("42.0% (1.2 GiB of 2.9 GiB), 35.1 MiB/s, ETA 0:48"), first
FIRST_LOOK seconds after the open began (an open that is not waiting has
its header by then, and costs no extra call) and then every EVERY seconds,
logging each answer at INFO on the `stoker` logger. docs/storage.md says
why a side call rather than a message in the open protocol.

Thread-safety: one watch per open; its thread only reads the daemon and
logs.
"""
import logging
import threading
from typing import Callable, List, Optional

from . import errors
from .info import DatasetInfo

_log = logging.getLogger("stoker")


class StagingWatch:
    """A context manager around the wait for a stream's header."""

    FIRST_LOOK = 0.25  # Seconds into the open before the first look.
    EVERY = 5.0        # Seconds between looks.

    def __init__(self, datasets: Callable[[], List[DatasetInfo]],
                 dataset: str, address: str) -> None:
        self._datasets = datasets
        self._dataset = dataset
        self._address = address
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "StagingWatch":
        self._thread = threading.Thread(target=self._run,
                                        name="stoker-staging-watch",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # Not joined: a look in flight ends within the client's
        # connect_timeout and logs nothing once the open is over.
        self._done.set()

    def _run(self) -> None:
        if self._done.wait(self.FIRST_LOOK):
            return
        while True:
            progress = self._look()
            if progress and not self._done.is_set():
                _log.info("waiting for dataset '%s': stokerd at %s is "
                          "staging it onto local disk: %s", self._dataset,
                          self._address, progress)
            if self._done.wait(self.EVERY):
                return

    def _look(self) -> str:
        """The daemon's staging line for the dataset, or "" when it is not
        being staged (or cannot be asked: the open reports that)."""
        try:
            infos = self._datasets()
        except errors.StokerError:
            return ""
        for info in infos:
            if info.name == self._dataset:
                return info.staging
        return ""
