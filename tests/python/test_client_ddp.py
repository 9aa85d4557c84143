"""Two trainer processes in one torch.distributed (gloo) group each read a
stoker.torch.Loader that takes rank and world size from the group; together
they receive every sample of each epoch exactly once.

The test runs this file as the worker script. The group meets through a
FileStore, and gloo binds to the loopback interface only.
"""
import json
import os
import subprocess
import sys

from conftest import PYTHON_CLIENT


def worker(rank, world_size, store, address, out):
    import torch
    import torch.distributed as dist
    from stoker.torch import Loader

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world_size)
    loader = Loader(address, "train", "bytes", batch_size=4, seed=3, epochs=2)
    epochs = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        epochs.append([int(i) for b in loader for i in b.sample_ids])
    count = torch.tensor([sum(len(ids) for ids in epochs)])
    dist.all_reduce(count)
    with open(out, "w") as f:
        json.dump({"rank": loader.rank, "world_size": loader.world_size,
                   "len": len(loader), "epochs": epochs,
                   "group_total": int(count)}, f)
    loader.close()
    dist.destroy_process_group()


def test_two_ranks_cover_each_epoch_exactly_once(client_daemon, tmp_path):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.pathsep.join(
                   [str(PYTHON_CLIENT)] +
                   [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    store = tmp_path / "store"
    procs = [subprocess.Popen(
        [sys.executable, __file__, str(rank), "2", str(store),
         client_daemon.address, str(tmp_path / f"rank{rank}.json")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in range(2)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = [json.loads((tmp_path / f"rank{r}.json").read_text())
               for r in range(2)]
    assert [(r["rank"], r["world_size"]) for r in results] == [(0, 2), (1, 2)]
    # 30 samples, global step 8: 3 full steps and a tail of 6, split 3 + 3.
    assert [r["len"] for r in results] == [4, 4]
    for epoch in range(2):
        ids = results[0]["epochs"][epoch] + results[1]["epochs"][epoch]
        assert sorted(ids) == list(range(30))
    assert results[0]["epochs"][0] != results[0]["epochs"][1]
    assert results[0]["group_total"] == results[1]["group_total"] == 60


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4],
           sys.argv[5])
