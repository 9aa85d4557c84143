"""PNG through `stoker pack` and a daemon, as a torchvision user's loader
sees it: PIL's Image.open(f).convert("RGB").

Every PNG colour type (palette with transparency, 1/4/8-bit gray, gray +
alpha, RGBA, 8- and 16-bit RGB, Adam7) decodes byte for byte as PIL
converts it; an ImageFolder with PNGs named .JPEG packs them (ImageNet has
one) and streams them through the old decode_jpeg config name; a resize of
a PNG matches PIL decode + the same resize within the fused JPEG path's
tolerance; and bytes of no known format are DATA_LOSS naming the dataset,
the shard and the key once.
"""
import io
import json
import struct
import zlib

import numpy as np
import pytest
import torch
import xxhash
from PIL import Image

import stoker
from conftest import STOKER, Daemon, make_images, run

W, H = 37, 23  # Odd sizes, so no row or column count is a multiple of 8.

# The fused JPEG path's tolerance against a full decode + resize
# (tests/pipeline/image_plan_test.cc: kMaxMean, kMaxP995).
MAX_MEAN, MAX_P995 = 3.5, 48


def noise(seed, shape):
    return np.random.default_rng(seed).integers(0, 256, shape, np.uint8)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(
        ">I", zlib.crc32(body))


def png_by_hand(samples, depth, color_type, interlace=False):
    """A PNG of `samples` (H x W x C, uint8 or big-endian uint16 values in
    uint16), filter 0, written here: PIL writes neither 16-bit RGB(A) nor
    Adam7."""
    h, w, c = samples.shape
    data = samples.astype(">u2" if depth == 16 else np.uint8)
    if interlace:
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
                  (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    else:
        passes = [(0, 0, 1, 1)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = data[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in sub:
            raw += b"\0" + row.tobytes()
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0,
                       1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pil_png(img, **save):
    out = io.BytesIO()
    img.save(out, "PNG", **save)
    return out.getvalue()


def palette_image(seed, colors, bits=None):
    img = Image.fromarray(noise(seed, (H, W)) % colors, "P")
    img.putpalette(list(noise(seed + 1, colors * 3)))
    img.info["transparency"] = bytes(noise(seed + 2, colors))
    return pil_png(img, **({"bits": bits} if bits else {}))


def cases():
    """{name: (PNG bytes, expected RGB as H x W x 3)}; expected is PIL's
    convert("RGB") except where PIL clips (16-bit gray: the high byte)."""
    rgb16 = np.random.default_rng(5).integers(0, 65536, (H, W, 3))
    rgba16 = np.random.default_rng(6).integers(0, 65536, (H, W, 4))
    gray16 = np.random.default_rng(7).integers(0, 65536, (H, W))
    pngs = {
        "palette-trns": palette_image(1, 256),
        "palette-4bit": palette_image(2, 16, bits=4),
        "gray": pil_png(Image.fromarray(noise(3, (H, W)), "L")),
        "gray-1bit": pil_png(Image.fromarray(noise(4, (H, W)) > 127)),
        "gray-alpha": pil_png(Image.fromarray(noise(8, (H, W, 2)), "LA")),
        "rgba": pil_png(Image.fromarray(noise(9, (H, W, 4)), "RGBA")),
        "rgb": pil_png(Image.fromarray(noise(10, (H, W, 3)), "RGB")),
        "rgb-16bit": png_by_hand(rgb16, 16, 2),
        "rgba-16bit": png_by_hand(rgba16, 16, 6),
        "rgb-adam7": png_by_hand(noise(11, (H, W, 3)), 8, 2, interlace=True),
        "rgba-16bit-adam7": png_by_hand(rgba16, 16, 6, interlace=True),
        "palette-adam7": None,  # Filled below.
        "gray-16bit": png_by_hand(gray16[..., None], 16, 0),
    }
    # A palette image interlaced: PIL's palette, by hand.
    index = noise(12, (H, W, 1))
    plte = noise(13, 256 * 3)
    raw = png_by_hand(index, 8, 3, interlace=True)
    # After the signature (8 bytes) and IHDR (25).
    pngs["palette-adam7"] = (raw[:33] + chunk(b"PLTE", plte.tobytes()) +
                             chunk(b"tRNS", bytes(noise(14, 256))) + raw[33:])
    expected = {}
    for name, data in pngs.items():
        img = Image.open(io.BytesIO(data))
        if name == "gray-16bit":
            expected[name] = np.repeat((gray16 >> 8).astype(np.uint8)[..., None],
                                       3, axis=2)
        else:
            expected[name] = np.asarray(img.convert("RGB"))
        assert expected[name].shape == (H, W, 3), name
    # The hand-written 16-bit files: PIL keeps the high byte, as promised.
    assert np.array_equal(expected["rgb-16bit"], (rgb16 >> 8).astype(np.uint8))
    return {name: (pngs[name], expected[name]) for name in pngs}


def serve(tmp_path, dataset, pipelines, on_corrupt="skip"):
    socket = tmp_path / "stoker.sock"
    config = tmp_path / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        f"on_corrupt: {on_corrupt}\n"
        f"datasets:\n  png: {{path: {dataset}}}\npipelines:\n" + pipelines)
    return Daemon(config, socket).start()


def stream_all(daemon, pipeline, count):
    """{sample id: image} for one epoch of `pipeline`."""
    client = stoker.Client(daemon.address)
    images = {}
    with client.stream("png", pipeline, batch_size=4, epochs=1,
                       transport="grpc") as s:
        for batch in s:
            for i, sid in enumerate(batch.sample_ids):
                images[sid] = np.array(batch["image"][i])
    assert sorted(images) == list(range(count))
    return images


# PIL warns that convert("RGB") drops a palette's transparency: so do we.
@pytest.mark.filterwarnings("ignore:Palette images with Transparency")
def test_every_png_colour_type_decodes_as_pil_converts_it(tmp_path):
    expected = cases()
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    names = sorted(expected, key=lambda n: n + ".png")  # As paths sort.
    for name in names:
        (src / f"{name}.png").write_bytes(expected[name][0])
    run([STOKER, "pack", tmp_path / "src", tmp_path / "ds", "--on-error",
         "fail"])
    run([STOKER, "verify", tmp_path / "ds", "--decode"])
    daemon = serve(tmp_path, tmp_path / "ds", f"""\
  exact:
    - decode_image: {{}}
    - center_crop: {{size: [{H}, {W}]}}
    - normalize: {{dtype: uint8}}
""")
    try:
        got = stream_all(daemon, "exact", len(names))
    finally:
        daemon.stop()
    for sid, name in enumerate(names):  # Ids follow sorted paths.
        want = expected[name][1]
        diff = np.abs(got[sid].astype(int) - want.astype(int))
        assert diff.max() == 0, (name, int(diff.max()),
                                 int((diff > 0).sum()))


def smooth_png(seed, w, h):
    """A photo-like RGB picture: smooth gradients and a disc, no noise, so a
    resize compares resamplers rather than aliasing."""
    y, x = np.mgrid[0:h, 0:w]
    disc = ((x - w * 0.4) ** 2 + (y - h * 0.55) ** 2) < (min(w, h) * 0.3) ** 2
    img = np.stack([x * 255 // w, y * 255 // h,
                    (x + y) * 255 // (w + h) + disc * 60], axis=2)
    return np.clip(img + seed, 0, 255).astype(np.uint8)


def reference(rgb, size, crop):
    """PIL-decoded pixels, resized (bilinear, half-pixel centres, the
    shorter side to `size`, like torchvision's resize) and centre-cropped."""
    t = torch.from_numpy(rgb.copy()).permute(2, 0, 1)[None].float()
    h, w = rgb.shape[:2]
    oh, ow = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    r = torch.nn.functional.interpolate(t, size=(oh, ow), mode="bilinear",
                                        align_corners=False, antialias=False)
    top, left = int(round((oh - crop) / 2)), int(round((ow - crop) / 2))
    r = r[0, :, top:top + crop, left:left + crop].round().clamp(0, 255)
    return r.permute(1, 2, 0).to(torch.uint8).numpy()


def test_png_named_jpeg_in_an_imagefolder_packs_and_streams(tmp_path):
    src = make_images(tmp_path / "src", 6, classes=2)
    # ImageNet's n02105855_2933.JPEG is a PNG; so are these, RGBA and
    # palette.
    pngs = {
        "class_000/zz.JPEG": pil_png(Image.fromarray(np.dstack(
            [smooth_png(3, 61, 47), noise(1, (47, 61))]), "RGBA")),
        "class_001/zz.JPEG": pil_png(Image.fromarray(
            smooth_png(9, 52, 70)).convert("P", palette=Image.ADAPTIVE)),
    }
    for rel, data in pngs.items():
        (src / rel).write_bytes(data)
    out = run([STOKER, "pack", src, tmp_path / "ds", "--on-error", "fail"])
    assert "zz.JPEG" not in out.stdout + out.stderr
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds",
                           "--json"]).stdout)
    assert info["num_samples"] == 8
    # Counted by content: the two .JPEG files are PNGs.
    assert info["fields"][0]["formats"] == {"jpeg": 6, "png": 2}
    run([STOKER, "verify", tmp_path / "ds", "--decode"])
    daemon = serve(tmp_path, tmp_path / "ds", """\
  val:
    - decode_jpeg: {}
    - resize: {size: 32}
    - center_crop: {size: 24}
    - normalize: {dtype: uint8}
""")
    try:
        got = stream_all(daemon, "val", 8)
    finally:
        daemon.stop()
    # Ids follow sorted source paths (ImageFolder order).
    order = sorted(p.relative_to(src).as_posix() for p in src.rglob("*")
                   if p.is_file())
    assert len(order) == 8
    for rel in pngs:
        sid = order.index(rel)
        pil = np.asarray(Image.open(io.BytesIO(pngs[rel])).convert("RGB"))
        want = reference(pil, 32, 24)
        diff = np.abs(got[sid].astype(int) - want.astype(int))
        mean, p995 = diff.mean(), np.percentile(diff, 99.5)
        print(f"{rel}: mean {mean:.3f}, p99.5 {p995}, max {diff.max()}")
        assert mean <= MAX_MEAN and p995 <= MAX_P995, (rel, mean, p995)
        # Not just any image of the right size: the wrong sample or a
        # decode of zeros is far off.
        assert np.abs(got[sid ^ 1].astype(int) - want).mean() > 4 * mean + 1


def test_bytes_of_no_known_format_are_data_loss_naming_shard_and_key(
        tmp_path):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    good = pil_png(Image.fromarray(noise(1, (H, W, 3)), "RGB"))
    for i in range(6):
        (src / f"{i}.png").write_bytes(good[:-12] + chunk(b"tEXt", bytes([i])) +
                                       good[-12:])
    run([STOKER, "pack", tmp_path / "src", tmp_path / "ds"])
    # Sample 3's PNG signature becomes GIF's, its record checksum fixed, so
    # only the decoder can object (the packer refuses such a file).
    target = (src / "3.png").read_bytes()
    hits = [(p, p.read_bytes().find(target))
            for p in sorted((tmp_path / "ds").glob("shard-*.lmdb"))]
    hits = [(p, at) for p, at in hits if at >= 0]
    assert len(hits) == 1
    shard, at = hits[0]
    data = bytearray(shard.read_bytes())
    start = at - 8  # u32 field count, u32 length of the image field.
    assert struct.unpack_from("<II", data, start) == (2, len(target))
    end = at + len(target) + 4 + 8  # The label field.
    data[at:at + 4] = b"GIF8"
    struct.pack_into("<Q", data, end,
                     xxhash.xxh3_64_intdigest(bytes(data[start:end])))
    shard.write_bytes(bytes(data))
    daemon = serve(tmp_path, tmp_path / "ds", f"""\
  exact:
    - decode_image: {{}}
    - center_crop: {{size: [{H}, {W}]}}
""", on_corrupt="fail")
    try:
        out = run([STOKER, "stream", "--address", daemon.address,
                   "--dataset", "png", "--pipeline", "exact", "--batch-size",
                   6, "--epochs", 1, "--json", "--quiet"], check=False)
    finally:
        daemon.stop()
    status = json.loads(out.stdout.strip().splitlines()[-1])["status"]
    assert out.returncode == 1
    assert status.startswith("DATA_LOSS"), status
    for part in ("dataset 'png': shard " + shard.name, ", key 3: ",
                 "not JPEG, PNG, WebP or TIFF (starts 47 49 46 38)"):
        assert part in status, (part, status)
    assert status.count("dataset 'png'") == 1, status
    assert status.count("key 3") == 1, status
