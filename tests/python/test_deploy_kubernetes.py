"""deploy/kubernetes/helpers.yaml, checked as far as a machine without a
cluster can (no kubectl here): every object parses, the selectors, names
and ports agree with each other, with the helper's config and with the node
DaemonSet; the helper's config and a node config that finds the helpers by
the Service's name both pass `stokerd --check-config`."""
import copy
import re
from pathlib import Path

import yaml

from conftest import ROOT, STOKERD, run
from pki import make_pki

KUBE = ROOT / "deploy" / "kubernetes"
CONTAINER = ROOT / "deploy" / "container"


def documents(path):
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text())}


def helpers():
    return documents(KUBE / "helpers.yaml")


def helper_config():
    return yaml.safe_load(helpers()["ConfigMap"]["data"]["stokerd.yaml"])


def node_config():
    return yaml.safe_load(
        documents(CONTAINER / "daemonset.yaml")["ConfigMap"]["data"]["stokerd.yaml"])


def check_config(config, tmp_path, dataset, pki=None):
    """stokerd --check-config on `config`, its dataset paths pointed at
    `dataset` and its TLS files (read when it loads) at `pki`'s."""
    for d in config["datasets"].values():
        d["path"] = str(dataset)
    files = {"tls.crt": "server.pem", "tls.key": "server.key",
             "ca.crt": "ca.pem"}
    for tls in (config["listen"].get("tls", {}),
                config.get("helpers", {}).get("tls", {})):
        for key, path in tls.items():
            if key != "server_name":
                tls[key] = str(pki / files[Path(path).name])
    if "unix" in config["listen"]:
        config["listen"]["unix"] = str(tmp_path / "stoker.sock")
    path = tmp_path / "stokerd.yaml"
    path.write_text(yaml.safe_dump(config))
    out = run([STOKERD, "--config", path, "--check-config"], check=False)
    assert out.returncode == 0, out.stderr


def test_every_object_is_a_known_kind_in_the_daemonsets_namespace():
    docs = helpers()
    assert set(docs) == {"ConfigMap", "Deployment", "Service",
                         "HorizontalPodAutoscaler", "NetworkPolicy"}
    versions = {"ConfigMap": "v1", "Deployment": "apps/v1", "Service": "v1",
                "HorizontalPodAutoscaler": "autoscaling/v2",
                "NetworkPolicy": "networking.k8s.io/v1"}
    namespace = documents(CONTAINER / "daemonset.yaml")["Namespace"]["metadata"]["name"]
    for kind, doc in docs.items():
        assert doc["apiVersion"] == versions[kind], kind
        assert doc["metadata"]["namespace"] == namespace, kind


def test_the_service_is_headless_and_selects_the_helper_pods_on_their_port():
    docs = helpers()
    deployment, service = docs["Deployment"], docs["Service"]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= labels.items()

    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    listen_port = int(helper_config()["listen"]["tcp"].rsplit(":", 1)[1])
    (service_port,) = service["spec"]["ports"]
    assert service_port["port"] == listen_port
    assert ports[service_port["targetPort"]] == listen_port
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["tcpSocket"]["port"] == listen_port, probe
    metrics_port = int(helper_config()["metrics"]["listen"].rsplit(":", 1)[1])
    assert ports["metrics"] == metrics_port
    assert int(pod["metadata"]["annotations"]["prometheus.io/port"]) == metrics_port

    # The config is mounted where the container reads it.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    assert container["args"] == ["--config", mounts["config"] + "/stokerd.yaml"]
    for d in helper_config()["datasets"].values():
        assert d["path"].startswith(mounts["data"])


def test_the_hpa_scales_the_deployment_on_the_adapters_stall_metric():
    docs = helpers()
    hpa = docs["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "name": docs["Deployment"]["metadata"]["name"]}
    assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"]
    (metric,) = hpa["metrics"]
    name = metric["external"]["metric"]["name"]
    # The README's prometheus-adapter rule serves that name from a
    # recording rule that deploy/prometheus/alerts.yml defines.
    readme = (KUBE / "README.md").read_text()
    rule = yaml.safe_load(re.search(r"```yaml\n(externalRules:.*?)```", readme,
                                    re.S).group(1))["externalRules"][0]
    assert rule["name"]["as"] == name
    recorded = {r.get("record") for g in yaml.safe_load(
        (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())["groups"]
        for r in g["rules"]}
    assert rule["seriesQuery"].strip("'") in recorded


def test_only_the_node_daemons_reach_the_helpers_grpc_port():
    docs = helpers()
    policy = docs["NetworkPolicy"]["spec"]
    helper_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= helper_labels.items()
    node_labels = documents(CONTAINER / "daemonset.yaml")["DaemonSet"]["spec"][
        "template"]["metadata"]["labels"]
    listen_port = int(helper_config()["listen"]["tcp"].rsplit(":", 1)[1])
    grpc_rules = [r for r in policy["ingress"]
                  if any(p["port"] == listen_port for p in r["ports"])]
    assert len(grpc_rules) == 1
    (source,) = grpc_rules[0]["from"]
    assert source["podSelector"]["matchLabels"].items() <= node_labels.items()


def test_the_helper_serves_what_the_nodes_serve_and_both_configs_load(
        tmp_path, dataset):
    helper, node = helper_config(), node_config()
    assert helper["datasets"] == node["datasets"]
    assert helper["pipelines"] == node["pipelines"]
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "helper").mkdir()
    check_config(copy.deepcopy(helper), tmp_path / "helper", dataset, pki)

    # The node finds the helpers by the Service's name over TLS, as both
    # files say, with one line.
    service = helpers()["Service"]
    name = (f"{service['metadata']['name']}.{service['metadata']['namespace']}"
            f".svc.cluster.local:{service['spec']['ports'][0]['port']}")
    lines = [re.search(r'helpers: \{dns: "' + re.escape(name) + r'".*\}',
                       (KUBE / f).read_text()).group(0)
             for f in ("helpers.yaml", "README.md")]
    assert lines[0] == lines[1]
    node["helpers"] = yaml.safe_load(lines[0])["helpers"]
    # Mutual TLS: the helpers' CA and the node's client certificate, and a
    # server name the helpers' certificate carries (the Service's).
    assert set(node["helpers"]["tls"]) == {"ca", "cert", "key", "server_name"}
    assert name.startswith(node["helpers"]["tls"]["server_name"])
    assert helper["listen"]["tls"]["client_ca"] == node["helpers"]["tls"]["ca"]
    (tmp_path / "node").mkdir()
    check_config(node, tmp_path / "node", dataset, pki)


def test_the_helpers_mount_their_tls_secret_where_their_config_reads_it():
    docs = helpers()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    secret = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"]
              if "secret" in v}
    assert secret == {"tls": "stokerd-helper-tls"}
    for path in helper_config()["listen"]["tls"].values():
        assert path.startswith(mounts["tls"] + "/"), path
    readme = (KUBE / "README.md").read_text()
    assert "create secret generic stokerd-$who-tls" in readme
