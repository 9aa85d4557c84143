"""Pipelines with views end to end (docs/pipeline-design.md §4.4): a
DINO-style pipeline (two global crops, four local ones, the labels once)
through a stokerd, over grpc and shm, in numpy and in stoker.torch: the
tensors' names, shapes and dtypes; every instance of every sample differs
from the others (each draws its own crop); the same (seed, epoch) gives the
same batch again; and `stokerd --check-config`-style errors at the view's
line."""
import numpy as np
import pytest

import stoker
from conftest import STOKERD, Daemon, run, write_config

DINO = """\
  dino:
    decode: [decode_image]
    views:
      global:
        count: 2
        ops:
          - random_resized_crop: {size: 32, scale: [0.4, 1]}
          - random_flip: {}
          - color_jitter: {brightness: 0.4, contrast: 0.4, p: 0.8}
          - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
          - layout: chw
      local:
        count: 4
        ops:
          - random_resized_crop: {size: 16, scale: [0.05, 0.4]}
          - random_flip: {}
          - solarize: {threshold: 128, p: 0.2}
"""

BATCH = 6


@pytest.fixture
def views_daemon(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    d = Daemon(write_config(tmp_path / "stoker.yaml", dataset, socket, DINO),
               socket)
    d.start()
    yield d
    d.stop()


def first_batch(address, transport, seed=5):
    client = stoker.Client(address)
    with client.stream("train", "dino", batch_size=BATCH, seed=seed,
                       epochs=1, transport=transport) as s:
        batch = next(iter(s))
        arrays = {name: np.array(batch[name]) for name in batch}
        globals_, locals_ = batch.view("global"), batch.view("local")
        assert len(globals_) == 2 and len(locals_) == 4
        assert np.array_equal(globals_[1], batch["global.1.image"])
        batch.release()
        return arrays


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_views_arrive_as_tensors_of_one_batch(views_daemon, transport):
    arrays = first_batch(views_daemon.address, transport)
    assert sorted(arrays) == sorted(
        ["global.0.image", "global.1.image", "local.0.image",
         "local.1.image", "local.2.image", "local.3.image", "label"])
    for k in range(2):
        a = arrays[f"global.{k}.image"]
        assert a.dtype == np.float32 and a.shape == (BATCH, 3, 32, 32)
    for k in range(4):
        a = arrays[f"local.{k}.image"]
        assert a.dtype == np.uint8 and a.shape == (BATCH, 16, 16, 3)
    assert arrays["label"].shape == (BATCH,)
    # Each instance drew its own crop: no two of a sample are equal.
    for i in range(BATCH):
        for name in ("global", "local"):
            count = 2 if name == "global" else 4
            crops = [arrays[f"{name}.{k}.image"][i].tobytes()
                     for k in range(count)]
            assert len(set(crops)) == count, (name, i)


def test_same_seed_same_views_over_both_transports(views_daemon):
    a = first_batch(views_daemon.address, "grpc")
    b = first_batch(views_daemon.address, "shm")
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    c = first_batch(views_daemon.address, "grpc", seed=6)
    assert not np.array_equal(a["local.0.image"], c["local.0.image"])


def test_torch_loader_gives_views(views_daemon):
    torch = pytest.importorskip("torch")
    from stoker.torch import Loader
    loader = Loader(views_daemon.address, "train", "dino",
                    batch_size=BATCH, seed=5, device="cpu", epochs=1)
    batch = next(iter(loader))
    views = batch.view("local")
    assert len(views) == 4
    assert all(isinstance(t, torch.Tensor) for t in views)
    assert tuple(batch.view("global")[0].shape) == (BATCH, 3, 32, 32)
    with pytest.raises(KeyError, match="no view 'other'"):
        batch.view("other")


def test_a_bad_view_is_refused_at_its_line(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket,
                          DINO.replace("solarize", "decode_image"))
    line = 1 + config.read_text().splitlines().index(
        "          - decode_image: {threshold: 128, p: 0.2}")
    result = run([STOKERD, "--config", config, "--check-config"],
                 check=False)
    assert result.returncode != 0
    assert f"stoker.yaml:{line}:" in result.stderr, result.stderr
    assert "view 'local'" in result.stderr
