"""limits.max_decode_pixels: an image bigger than the limit is refused from
its JPEG header, before any pixel is decoded (six 8192x8192
progressive JPEGs took a daemon with a 64 MiB budget to 505 MB). Under
on_corrupt: skip the sample is left out and counted; under fail the stream
ends with DATA_LOSS naming the dataset, the sample and its size."""
import json

import pytest
from PIL import Image

from conftest import STOKER, Daemon, TRAIN_PIPELINE, make_images, run

LIMIT = 1_000_000


@pytest.mark.parametrize("on_corrupt", ["skip", "fail"])
def test_an_image_over_max_decode_pixels_is_a_corrupt_sample(tmp_path,
                                                             on_corrupt):
    src = make_images(tmp_path / "src", 8, classes=2)
    # Sorted last in class_001, so it is sample 7. Flat colour: a few KB.
    Image.new("RGB", (1001, 1000), (90, 120, 30)).save(
        src / "class_001" / "zz_huge.jpg", quality=90, progressive=True)
    run([STOKER, "pack", src, tmp_path / "ds"])
    socket = tmp_path / "stoker.sock"
    config = tmp_path / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        f"on_corrupt: {on_corrupt}\nlimits: {{max_decode_pixels: {LIMIT}}}\n"
        f"datasets:\n  big: {{path: {tmp_path / 'ds'}}}\n"
        "pipelines:\n" + TRAIN_PIPELINE)
    daemon = Daemon(config, socket).start()
    try:
        ids = tmp_path / "ids.txt"
        out = run([STOKER, "stream", "--address", daemon.address,
                   "--dataset", "big", "--pipeline", "train", "--batch-size",
                   3, "--epochs", 1, "--indices-out", ids, "--json",
                   "--quiet"], check=False)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        got = [int(x) for x in ids.read_text().split()]
        if on_corrupt == "skip":
            assert out.returncode == 0, out.stderr
            assert result["skipped_samples"] == 1, result
            assert sorted(got) == list(range(8))
        else:
            assert out.returncode == 1
            status = result["status"]
            assert status.startswith("DATA_LOSS"), result
            # The dataset, shard file and key once (the key is the id).
            assert status.count("dataset 'big'") == 1, status
            for part in ("dataset 'big': shard shard-", ", key 8: ",
                         "image 1001x1000",
                         f"over limits.max_decode_pixels ({LIMIT})"):
                assert part in status, (part, status)
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()
