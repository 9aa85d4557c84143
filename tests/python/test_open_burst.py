"""A burst of 1,000 opens that must wait (for memory budget) against a real
stokerd: waiting opens count against max_streams_per_peer, those past it are
refused at once naming the bound, and waiting costs the daemon no thread.

3,000 such opens once gave the daemon 3,017 threads and 128 MB more RSS: a
thread per open, each waiting for admission."""
import asyncio
import re

import grpc
import pytest

from conftest import Daemon, write_config
from stoker._proto.stoker.v1 import stoker_pb2 as pb
from stoker._proto.stoker.v1 import stoker_pb2_grpc as pb_grpc

BURST = 1000


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def open_request(timeout):
    return pb.StreamRequest(open=pb.OpenStream(
        dataset="train", pipeline="train", batch_size=16, prefetch=4,
        epochs=1, open_timeout=timeout))


async def burst(address, pid, waiting):
    """Opens one stream that fills the budget, then BURST more; returns the
    refusals that came while `waiting` of them wait, the daemon's threads
    then, and every outcome once the first stream is gone."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.StokerStub(channel)
        holder = stub.Stream()  # Stays open, unread.
        await holder.write(open_request(5))
        assert (await holder.read()).HasField("header")

        async def one():
            call = stub.Stream()
            await call.write(open_request(60))
            try:
                await call.read()
                return "admitted"
            except grpc.aio.AioRpcError as e:
                return (e.code(), e.details())
            finally:
                call.cancel()

        tasks = [asyncio.ensure_future(one()) for _ in range(BURST)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        refused = []
        while len(refused) < BURST - waiting:
            assert loop.time() < deadline, len(refused)
            await asyncio.sleep(0.05)
            refused = [t.result() for t in tasks if t.done()]
        threads = threads_of(pid)
        holder.cancel()  # The budget frees up: the waiting ones get in.
        results = await asyncio.gather(*tasks)
    return refused, threads, results


@pytest.mark.parametrize("per_peer", [16, 2000])
def test_a_burst_of_waiting_opens_is_bounded(dataset, tmp_path, per_peer):
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    # A stream of 4 batches of 16 (32x32x3 float32) needs ~0.8 MB: one fits.
    config.write_text(config.read_text().replace(
        "memory_budget: 256MiB",
        "memory_budget: 1MiB\n"
        f"limits: {{max_streams: 4000, max_streams_per_peer: {per_peer}}}"))
    daemon = Daemon(config, socket).start()
    waiting = min(BURST, per_peer - 1)  # The holder is the peer's too.
    try:
        idle = threads_of(daemon.proc.pid)
        refused, threads, results = asyncio.run(
            burst(daemon.address, daemon.proc.pid, waiting))
        print(f"daemon threads: {idle} idle, {threads} with {waiting} opens "
              f"waiting and {len(refused)} refused")
        assert len(refused) == BURST - waiting
        for code, details in refused:
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
            assert f"max_streams_per_peer={per_peer}" in details, details
            assert f"{waiting} waiting to open" in details, details
        # No thread per waiting open: gRPC's own pollers at most.
        assert threads <= idle + 8, (idle, threads)
        assert results.count("admitted") == waiting, set(map(str, results))
    finally:
        daemon.stop()
