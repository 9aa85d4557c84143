"""A burst of opens that must wait (for memory budget) against a real
stokerd: waiting opens count against max_streams_per_peer, the ones past it
are refused at once naming the bound, and the daemon's threads stay bounded.

3,000 such opens once gave the daemon 3,017 threads and 128 MB more RSS."""
import asyncio
import re

import grpc

from conftest import Daemon, write_config
from stoker._proto.stoker.v1 import stoker_pb2 as pb
from stoker._proto.stoker.v1 import stoker_pb2_grpc as pb_grpc

BURST = 1000
PER_PEER = 16


def threads_of(pid):
    status = open(f"/proc/{pid}/status").read()
    return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))


def open_request(timeout):
    return pb.StreamRequest(open=pb.OpenStream(
        dataset="train", pipeline="train", batch_size=16, prefetch=4,
        epochs=1, open_timeout=timeout))


async def burst(address, pid):
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.StokerStub(channel)
        # This one fills the budget and stays open, unread.
        holder = stub.Stream()
        await holder.write(open_request(5))
        assert (await holder.read()).HasField("header")

        async def one():
            call = stub.Stream()
            await call.write(open_request(20))
            try:
                await call.read()
                return "admitted"
            except grpc.aio.AioRpcError as e:
                return (e.code(), e.details())
            finally:
                call.cancel()

        tasks = [asyncio.ensure_future(one()) for _ in range(BURST)]
        # The refusals come at once; the waiting ones stay waiting.
        refused = []
        deadline = asyncio.get_running_loop().time() + 60
        while len(refused) < BURST - (PER_PEER - 1):
            assert asyncio.get_running_loop().time() < deadline, len(refused)
            await asyncio.sleep(0.05)
            refused = [t.result() for t in tasks if t.done()]
        threads_while_waiting = threads_of(pid)
        holder.cancel()  # The budget frees up: the waiting ones get in.
        results = await asyncio.gather(*tasks)
    return refused, results, threads_while_waiting


def test_a_burst_of_waiting_opens_is_bounded(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    # A stream of 4 batches of 16 (32x32x3 float32) needs ~0.8 MB: one fits.
    config.write_text(config.read_text().replace(
        "memory_budget: 256MiB",
        f"memory_budget: 1MiB\nlimits: {{max_streams_per_peer: {PER_PEER}}}"))
    daemon = Daemon(config, socket).start()
    try:
        idle_threads = threads_of(daemon.proc.pid)
        refused, results, threads = asyncio.run(
            burst(daemon.address, daemon.proc.pid))
        assert all(code == grpc.StatusCode.RESOURCE_EXHAUSTED
                   for code, _ in refused), set(refused)
        assert all("max_streams_per_peer=16" in details and
                   "waiting to open" in details
                   for _, details in refused), refused[0]
        assert len(refused) == BURST - (PER_PEER - 1)
        print(f"daemon threads: {idle_threads} idle, {threads} with "
              f"{PER_PEER - 1} opens waiting and {len(refused)} refused")
        # The holder's and each waiting open's, and gRPC's own handful.
        assert threads <= idle_threads + PER_PEER + 8, (idle_threads, threads)
        admitted = [r for r in results if r == "admitted"]
        assert len(admitted) == PER_PEER - 1, results
        assert "event=stream_open" in daemon.log()
    finally:
        daemon.stop()
