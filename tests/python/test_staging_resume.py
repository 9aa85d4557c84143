"""stokerd killed in the middle of a shard, then restarted: the restarted
copy keeps the chunks its journal names (docs/storage.md, pull's resume)
and fetches only the rest. A real nginx behind the fault proxy, whose
shared-link limit keeps the copy slow enough to be cut in the middle."""
import shutil
import signal

import pytest

from conftest import STOKER, make_images, run, wait_for
from storage_servers import FaultProxy, Nginx
from test_staging import files, metric, stage_line, start

SHARD = "shard-00000.lmdb"


@pytest.fixture
def one_shard(tmp_path):
    """A pack of one shard of about 1 MB, served by nginx as d/train behind
    a fault proxy: (proxy, the pack's folder)."""
    pack = tmp_path / "pack"
    run([STOKER, "pack", make_images(tmp_path / "images", 300), pack,
         "--shards", 1])
    root = tmp_path / "www"
    shutil.copytree(pack, root / "d" / "train")
    server = Nginx(root, tmp_path / "nginx").start()
    proxy = FaultProxy(server.port).start()
    yield proxy, pack
    proxy.stop()
    server.stop()


def test_kill_9_mid_shard_then_the_restart_fetches_only_the_rest(
        tmp_path, one_shard):
    proxy, pack = one_shard
    size = (pack / SHARD).stat().st_size
    assert size > 16 * 65536  # Many chunks of 64 KiB.
    proxy.faults.link_rate = size // 8  # About 8 s for the shard.
    staged = tmp_path / "staged"
    entry = {"train": f"{{path: {staged}, source: {proxy.url}/d/train}}"}
    extra = "storage: {parallel: 1, chunk_size: 64KiB}\n"
    d = start(tmp_path, entry, extra)
    try:
        assert wait_for(
            lambda: proxy.faults.served.get(SHARD, 0) >= size // 2, 60)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
    finally:
        d.stop()
    assert not (staged / "manifest.json").exists()
    assert not (staged / SHARD).exists()
    # The answer cut by the kill has stopped counting.
    assert wait_for(lambda: proxy.faults.answering == 0, 30)
    first = proxy.faults.served[SHARD]

    proxy.faults.link_rate = 0
    again = start(tmp_path, entry, extra, name="again")
    try:
        assert wait_for(
            lambda: metric(again, "stoker_stage_complete", "train") == 1, 60)
        fetched = proxy.faults.served[SHARD] - first
        # What was cut in the middle of a chunk is fetched again, nothing
        # more: both daemons together fetched the shard about once (a
        # restart from the shard's start makes it 1.5 shards or more; the
        # margin is for the bytes the proxy had sent and the killed daemon
        # not yet written).
        assert first + fetched < size * 1.4
        # The restarted daemon counts only what it fetched, and says how
        # much it kept.
        assert metric(again, "stoker_stage_bytes_total", "train") == fetched
        resumed = int(stage_line(again, "stage_end")[0]
                      .split(" resumed=")[1].split()[0])
        assert resumed == size - fetched
        assert "1 part file keeps" in again.log()
        assert files(staged) == files(pack)
    finally:
        again.stop()
