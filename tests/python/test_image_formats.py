"""WebP and TIFF through `stoker pack` and a daemon, as a torchvision
user's loader sees them: PIL's Image.open(f).convert("RGB").

Each variant PIL writes (lossless and lossy WebP, with and without alpha;
raw, LZW and deflate TIFF in RGB, RGBA, gray, 1-bit and palette) packs from
an ImageFolder under a .JPEG name, since the format comes from the bytes,
counts under its format in `stoker inspect`, and streams byte for byte as
PIL converts it, whole and through a window with odd offsets (a centre crop
smaller than the image). A BMP, which no decoder takes, is skipped at pack
with its reason.
"""
import io
import json

import numpy as np
from PIL import Image

from conftest import STOKER, run
from test_png import noise, serve, stream_all

W, H = 37, 23  # Odd sizes: no row or column count is a multiple of 8.
CW, CH = W - 6, H - 5  # A centre crop at odd offsets: a window.


def encode(img, fmt, **save):
    out = io.BytesIO()
    img.save(out, fmt, **save)
    return out.getvalue()


def smooth(seed):
    """A photo-like picture, for the lossy WebP cases."""
    y, x = np.mgrid[0:H, 0:W]
    return np.clip(np.stack([x * 7, y * 11, (x + y) * 5], axis=2) + seed,
                   0, 255).astype(np.uint8)


def cases():
    """{name: (bytes, format in the manifest)}."""
    rgb = Image.fromarray(noise(1, (H, W, 3)), "RGB")
    rgba = Image.fromarray(noise(2, (H, W, 4)), "RGBA")
    gray = Image.fromarray(noise(3, (H, W)), "L")
    palette = Image.fromarray(noise(4, (H, W)) % 200, "P")
    palette.putpalette(list(noise(5, 200 * 3)))
    photo = Image.fromarray(smooth(6), "RGB")
    photo_a = Image.fromarray(np.dstack([smooth(7), noise(8, (H, W))]), "RGBA")
    return {
        "webp-lossless": (encode(rgb, "WEBP", lossless=True), "webp"),
        # exact: keep the RGB of transparent pixels, which PIL returns too.
        "webp-lossless-rgba": (encode(rgba, "WEBP", lossless=True,
                                      exact=True), "webp"),
        "webp-lossy": (encode(photo, "WEBP", quality=80), "webp"),
        "webp-lossy-alpha": (encode(photo_a, "WEBP", quality=80), "webp"),
        "tiff-raw": (encode(rgb, "TIFF"), "tiff"),
        "tiff-lzw": (encode(rgb, "TIFF", compression="tiff_lzw"), "tiff"),
        "tiff-deflate-gray": (encode(gray, "TIFF",
                                     compression="tiff_adobe_deflate"),
                              "tiff"),
        "tiff-palette": (encode(palette, "TIFF"), "tiff"),
        "tiff-rgba": (encode(rgba, "TIFF", compression="tiff_lzw"), "tiff"),
        "tiff-1bit": (encode(gray.convert("1"), "TIFF"), "tiff"),
    }


def test_webp_tiff_and_bmp_decode_as_pil_converts_them(tmp_path):
    files = cases()
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    names = sorted(files, key=lambda n: n + ".JPEG")  # As paths sort.
    for name in names:
        (src / f"{name}.JPEG").write_bytes(files[name][0])
    out = run([STOKER, "pack", tmp_path / "src", tmp_path / "ds",
               "--on-error", "fail"])
    assert "JPEG" not in out.stderr, out.stderr
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds",
                           "--json"]).stdout)
    assert info["num_samples"] == len(names)
    assert info["fields"][0]["formats"] == {"webp": 4, "tiff": 6}
    run([STOKER, "verify", tmp_path / "ds", "--decode"])
    daemon = serve(tmp_path, tmp_path / "ds", f"""\
  whole:
    - decode_image: {{}}
    - center_crop: {{size: [{H}, {W}]}}
    - normalize: {{dtype: uint8}}
  window:
    - decode_image: {{}}
    - center_crop: {{size: [{CH}, {CW}]}}
    - normalize: {{dtype: uint8}}
""")
    try:
        whole = stream_all(daemon, "whole", len(names))
        window = stream_all(daemon, "window", len(names))
    finally:
        daemon.stop()
    # torchvision's center_crop: top = round((H - CH) / 2).
    top, left = int(round((H - CH) / 2)), int(round((W - CW) / 2))
    assert (top, left) == (2, 3)
    for sid, name in enumerate(names):  # Ids follow sorted paths.
        want = np.asarray(Image.open(io.BytesIO(files[name][0]))
                          .convert("RGB"))
        assert want.shape == (H, W, 3), name
        for got, expect in ((whole[sid], want),
                            (window[sid],
                             want[top:top + CH, left:left + CW])):
            diff = np.abs(got.astype(int) - expect.astype(int))
            assert diff.max() == 0, (name, int(diff.max()),
                                     int((diff > 0).sum()))


def test_a_bmp_is_skipped_at_pack_naming_why(tmp_path):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    rgb = Image.fromarray(noise(1, (H, W, 3)), "RGB")
    (src / "a.png").write_bytes(encode(rgb, "PNG"))
    (src / "b.JPEG").write_bytes(encode(rgb, "BMP"))
    out = run([STOKER, "pack", tmp_path / "src", tmp_path / "ds"])
    assert "skipped 1 samples:" in out.stdout, out.stdout
    assert (f"{src / 'b.JPEG'}: not JPEG, PNG, WebP or TIFF (starts 42 4D"
            in out.stdout), out.stdout
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds",
                           "--json"]).stdout)
    assert info["num_samples"] == 1
