"""`cmake --install` gives a usable daemon, CLI, headers and client library."""
import subprocess

from conftest import BUILD, ROOT, run


def test_installed_tree_builds_and_runs_a_client(daemon, tmp_path):
    prefix = tmp_path / "prefix"
    run(["cmake", "--install", BUILD, "--prefix", prefix])
    for path in ["bin/stokerd", "bin/stoker", "include/stoker/client.h",
                 "lib/libstoker_client.so", "lib/pkgconfig/stoker-client.pc"]:
        assert (prefix / path).exists(), path
    assert "stokerd" in run([prefix / "bin" / "stokerd", "--help"]).stdout
    # The installed stokerd reads the presets installed beside it.
    presets = prefix / "share" / "stoker" / "presets"
    assert (presets / "imagenet_train.yaml").is_file()
    assert (prefix / "share" / "stoker" / "stokerd.yaml").is_file()
    reference = run([prefix / "bin" / "stokerd", "--help-config"],
                    env={"PATH": "/usr/bin:/bin"}).stdout
    assert f"From {presets};" in reference

    flags = run(["pkg-config", "--cflags", "--libs", "stoker-client"],
                env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig"),
                     "PATH": "/usr/bin:/bin"}).stdout.split()
    exe = tmp_path / "stream_batches"
    run(["g++", "-std=c++17", "-O1", ROOT / "client/examples/stream_batches.cc",
         "-o", exe, *flags])
    out = run([exe, daemon.address, "train", "train", 4, 2]).stdout
    assert "dataset train: 30 samples" in out
    assert out.count("image[4,3,32,32] label[4]") == 2
