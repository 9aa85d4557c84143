"""deploy/container: the Dockerfile's package lists and user, the DaemonSet
manifest's wiring, and the configs shipped with them, checked without
Docker (no image is built or pulled here)."""
import re
import subprocess

import pytest
import yaml

from conftest import BUILD, ROOT, STOKERD, run

CONTAINER = ROOT / "deploy" / "container"
DOCKERFILE = CONTAINER / "Dockerfile"
# In debian:12 itself (apt needs them), so the image need not list them.
BASE_IMAGE_PACKAGES = {"libc6", "libstdc++6", "libgcc-s1"}


def stages(text):
    """The Dockerfile's stages: [(FROM line, [instructions])], with line
    continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            out.append((line, []))
        else:
            out[-1][1].append(line)
    return out


def apt_packages(instructions):
    """The packages of the stage's `apt-get install` commands."""
    packages = []
    for line in instructions:
        for m in re.finditer(r"apt-get install ((?:[-\w.+]+\s*)+)", line):
            packages += [p for p in m.group(1).split() if not p.startswith("-")]
    return packages


def install_deps_packages():
    text = (ROOT / ".ci" / "install-deps").read_text()
    block = re.search(r"PACKAGES=\((.*?)\)", text, re.S).group(1)
    return {p for p in block.split() if not p.startswith("#")}


def needed_libraries(binary):
    """The paths of the shared libraries `binary` names (NEEDED), leaving
    out Stoker's own libraries, the dynamic loader and sanitizer runtimes."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        run(["readelf", "-d", binary]).stdout)
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", run(["ldd", binary]).stdout,
                            re.M))
    # A sanitizer build (tests/run.sh's second pass) also needs the
    # sanitizer runtimes, which a release image does not.
    return {paths[soname] for soname in needed
            if not soname.startswith(("libstoker_", "ld-linux", "libasan",
                                      "libubsan"))}


def owning_packages(paths):
    """The Debian packages that own `paths` (one dpkg query: it is slow)."""
    # With merged /usr, dpkg may know a file by its /lib or its /usr/lib
    # name: ask for both.
    queries = set()
    for path in paths:
        queries |= {path, path.replace("/usr/lib/", "/lib/", 1),
                    path.replace("/lib/", "/usr/lib/", 1)}
    out = subprocess.run(["dpkg", "-S", *sorted(queries)],
                         capture_output=True, text=True)
    owners = {}
    for line in out.stdout.splitlines():
        package, _, path = line.partition(": ")
        owners[path] = package.split(":")[0]
    packages = set()
    for path in paths:
        names = [owners.get(path),
                 owners.get(path.replace("/usr/lib/", "/lib/", 1)),
                 owners.get(path.replace("/lib/", "/usr/lib/", 1))]
        found = [n for n in names if n]
        assert found, f"no package owns {path}"
        packages.add(found[0])
    return packages


def dependencies(packages):
    """The packages that `packages` depend on directly (installed here)."""
    out = run(["dpkg-query", "-W", "-f", "${Depends}\n", *sorted(packages)])
    names = set()
    for line in out.stdout.splitlines():
        for alternative in re.split(r"[,|]", line):
            if alternative.strip():
                names.add(alternative.split()[0].split(":")[0])
    return names


def test_dockerfile_builds_on_debian_12_and_runs_as_non_root():
    (build_from, build), (run_from, runtime) = stages(DOCKERFILE.read_text())
    assert build_from == "FROM debian:12 AS build"
    assert run_from == "FROM debian:12"
    assert any(i.startswith("RUN cmake -S . -B /build") for i in build)
    assert "COPY --from=build /opt/stoker /opt/stoker" in runtime
    users = [i for i in runtime if i.startswith("USER ")]
    assert users == ["USER stoker:stoker"]
    assert any("useradd --system --uid" in i for i in runtime)
    assert runtime[-1] == 'CMD ["--config", "/etc/stoker/stokerd.yaml"]'
    # No compiler or -dev package in the runtime image.
    assert not [p for p in apt_packages(runtime)
                if p.endswith("-dev") or p in ("g++", "cmake")]


def test_build_stage_packages_come_from_install_deps():
    (_, build), _ = stages(DOCKERFILE.read_text())
    packages = set(apt_packages(build))
    assert "libgrpc++-dev" in packages and "g++" in packages
    assert packages <= install_deps_packages(), (
        packages - install_deps_packages())


def test_runtime_stage_has_exactly_the_libraries_the_binaries_need():
    _, (_, runtime) = stages(DOCKERFILE.read_text())
    listed = set(apt_packages(runtime))
    libraries = set()
    for binary in (STOKERD, BUILD / "client" / "cli" / "stoker",
                   BUILD / "proto" / "libstoker_proto.so",
                   BUILD / "client" / "libstoker_client.so"):
        libraries |= needed_libraries(binary)
    needed = owning_packages(libraries) - BASE_IMAGE_PACKAGES
    # A Debug build links some of libgrpc29's own dependencies directly;
    # apt installs those with it.
    pulled_in = dependencies(listed)
    assert needed - listed - pulled_in == set(), "missing from the runtime stage"
    assert listed - needed == set(), "listed but not needed"


def daemonset_documents():
    docs = list(yaml.safe_load_all((CONTAINER / "daemonset.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def test_daemonset_wires_socket_data_metrics_and_health_probes():
    docs = daemonset_documents()
    ds = docs["DaemonSet"]
    assert ds["apiVersion"] == "apps/v1"
    pod = ds["spec"]["template"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= \
        pod["metadata"]["labels"].items()
    spec = pod["spec"]
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}

    # The socket directory and the data come from the node (hostPath); the
    # data read-only.
    assert volumes["socket-dir"]["hostPath"]["path"] == "/run/stoker"
    assert mounts["socket-dir"]["mountPath"] == "/run/stoker"
    assert "hostPath" in volumes["data"]
    assert mounts["data"]["readOnly"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False

    config = yaml.safe_load(docs["ConfigMap"]["data"]["stokerd.yaml"])
    assert config["listen"]["unix"].startswith(mounts["socket-dir"]["mountPath"])
    assert config["datasets"]["train"]["path"].startswith(
        mounts["data"]["mountPath"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    # Prometheus scrapes the port the config serves /metrics on.
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    metrics_port = int(config["metrics"]["listen"].rsplit(":", 1)[1])
    assert int(annotations["prometheus.io/port"]) == metrics_port
    assert ports["metrics"] == metrics_port

    # Liveness and readiness ask the gRPC health service on the TCP port.
    grpc_port = int(config["listen"]["tcp"].rsplit(":", 1)[1])
    assert ports["grpc"] == grpc_port
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["grpc"]["port"] == grpc_port, probe


def check_config(text, tmp_path, dataset):
    """Runs `stokerd --check-config` on `text` with its socket put in
    tmp_path and every dataset pointed at the test dataset."""
    config = yaml.safe_load(text)
    config["listen"]["unix"] = str(tmp_path / "stoker.sock")
    for d in config["datasets"].values():
        d["path"] = str(dataset)
    path = tmp_path / "stokerd.yaml"
    path.write_text(yaml.safe_dump(config))
    out = run([STOKERD, "--config", path, "--check-config"], check=False)
    assert out.returncode == 0, out.stderr
    return config


def image_config():
    """config/stokerd.yaml as the Dockerfile rewrites it for the image."""
    (command,) = [line for line in DOCKERFILE.read_text().splitlines()
                  if "sed 's|" in line]
    pattern, replacement = command.split("sed 's|", 1)[1].split("|")[:2]
    text = (ROOT / "config" / "stokerd.yaml").read_text()
    image = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    assert image != text, "the Dockerfile's rewrite matches no line"
    return image


@pytest.mark.parametrize("name", ["daemonset", "image", "default"])
def test_shipped_configs_are_valid(name, tmp_path, dataset):
    if name == "daemonset":
        text = daemonset_documents()["ConfigMap"]["data"]["stokerd.yaml"]
    elif name == "image":
        text = image_config()
        assert yaml.safe_load(text)["metrics"]["listen"] == "0.0.0.0:9464"
    else:
        text = (ROOT / "config" / "stokerd.yaml").read_text()
    check_config(text, tmp_path, dataset)
