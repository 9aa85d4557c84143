"""A DDP job under torchrun (gloo, CPU) checkpoints its stoker.torch.Loader
mid-epoch and is restarted with another number of processes and the same
global batch; the two runs together receive every sample of the epoch
exactly once, and the restarted run goes on to a whole next epoch.

The test runs this file as torchrun's worker script, twice: `first` with
one rank count reads STOP steps of epoch 0 and saves rank 0's state with
torch.save; `second` with the other count loads it on every rank and reads
to the end of epoch 1. Each rank writes what it read to a JSON file.
"""
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import PYTHON_CLIENT

GLOBAL_BATCH = 8
STOP = 2


def worker(phase, address, checkpoint, out):
    import torch
    import torch.distributed as dist
    from stoker.torch import Loader

    dist.init_process_group("gloo")  # From torchrun's environment.
    world = dist.get_world_size()
    loader = Loader(address, "train", "bytes",
                    batch_size=GLOBAL_BATCH // world, seed=6, epochs=2)
    epochs = []
    if phase == "first":
        ids = []
        for step, batch in enumerate(loader):
            ids += [int(i) for i in batch.sample_ids]
            if step + 1 == STOP:
                break
        epochs.append(ids)
        dist.barrier()
        if dist.get_rank() == 0:
            torch.save({"loader": loader.state_dict()}, checkpoint)
    else:
        loader.load_state_dict(torch.load(checkpoint)["loader"])
        for epoch in range(2):
            loader.set_epoch(epoch)
            epochs.append([int(i) for b in loader for i in b.sample_ids])
    count = torch.tensor([sum(len(ids) for ids in epochs)])
    dist.all_reduce(count)
    with open(out, "w") as f:
        json.dump({"rank": loader.rank, "world_size": loader.world_size,
                   "job_id": loader.job_id, "epochs": epochs,
                   "group_total": int(count)}, f)
    loader.close()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(phase, nproc, address, tmp_path):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(
                   [str(PYTHON_CLIENT)] +
                   [p for p in [os.environ.get("PYTHONPATH")] if p]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    out = tmp_path / phase
    out.mkdir()
    # Static rendezvous on a free port; the run id (the Loader's job_id)
    # differs between the runs, as a restarted job's plan does. Debian's
    # torch 1.13 on Python 3.11 cannot parse the default `--redirects 0
    # --tee 0` (enum.IntFlag no longer iterates over its zero member), so
    # stderr is teed to a log under tmp_path instead.
    args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
            "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
            "--master_port", str(free_port()), "--rdzv_id", f"resize-{phase}",
            "--max_restarts", "0", "--redirects", "2", "--tee", "2",
            "--log_dir", str(tmp_path / f"{phase}-logs"), __file__, phase,
            address, str(tmp_path / "ckpt.pt"), str(out)]
    try:
        done = subprocess.run(args, env=env, capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun {phase} with {nproc} processes took over 60 s: "
                    f"{e.stderr}")
    assert done.returncode == 0, done.stderr[-4000:]
    results = [json.loads((out / f"rank{r}.json").read_text())
               for r in range(nproc)]
    assert [(r["rank"], r["world_size"]) for r in results] == [
        (r, nproc) for r in range(nproc)]
    return results


@pytest.mark.parametrize("before, after", [(4, 2), (2, 4)])
def test_a_ddp_job_resumes_on_another_rank_count(client_daemon, tmp_path,
                                                 before, after):
    first = torchrun("first", before, client_daemon.address, tmp_path)
    second = torchrun("second", after, client_daemon.address, tmp_path)
    assert first[0]["job_id"] == "resize-first"
    assert second[0]["job_id"] == "resize-second"
    head = [i for r in first for i in r["epochs"][0]]
    assert len(head) == STOP * GLOBAL_BATCH
    rest = [i for r in second for i in r["epochs"][0]]
    assert sorted(head + rest) == list(range(30))
    assert sorted(i for r in second for i in r["epochs"][1]) == \
        list(range(30))
    assert first[0]["group_total"] == len(head)
    assert second[0]["group_total"] == len(rest) + 30


if __name__ == "__main__":
    phase, address, checkpoint, out = sys.argv[1:5]
    worker(phase, address, checkpoint,
           os.path.join(out, f"rank{os.environ['RANK']}.json"))
