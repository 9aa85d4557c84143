"""`stoker push` and `stoker pull` against s3rver behind a proxy that checks
every request's SigV4 signature with botocore (storage_servers.py):
signing, multipart uploads, credentials from the environment or a shared
credentials file (re-read when refused), and no secret in any output."""
import io
import os
import random
import urllib.error
import urllib.request

import pytest
from PIL import Image

from conftest import STOKER, run
from storage_servers import ACCESS_KEY, SECRET_KEY, FaultProxy, S3rver


@pytest.fixture
def s3(tmp_path):
    server = S3rver(tmp_path / "s3").start()
    proxy = FaultProxy(server.port, secret=SECRET_KEY).start()
    yield proxy
    proxy.stop()
    server.stop()


def aws_env(tmp_path, proxy, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path / "home"), AWS_ACCESS_KEY_ID=ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=proxy.url)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file()}


def signed_get(url, secret):
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    req = AWSRequest(method="GET", url=url,
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    S3SigV4Auth(Credentials(ACCESS_KEY, secret), "s3", "us-east-1").add_auth(
        req)
    try:
        with urllib.request.urlopen(urllib.request.Request(
                url, headers=dict(req.headers.items()))) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_proxy_refuses_a_bad_signature_and_accepts_a_good_one(s3):
    url = f"{s3.url}/data?list-type=2"
    assert signed_get(url, SECRET_KEY) == 200
    assert signed_get(url, "not-the-secret") == 403
    assert signed_get(f"{s3.url}/data?list-type=2&prefix=x", SECRET_KEY) == 200


def test_push_then_pull_through_signature_checking_s3(tmp_path, s3, dataset):
    env = aws_env(tmp_path, s3)
    run([STOKER, "push", dataset, "s3://data/packs/train"], env=env)
    puts = [p for m, p in s3.faults.requests if m == "PUT"]
    assert puts[-1] == "/data/packs/train/manifest.json"
    dest = tmp_path / "dest"
    r = run([STOKER, "pull", "s3://data/packs/train", dest, "--chunk-size",
             "16KiB"], env=env)
    assert "pulled train: 6 files" in r.stdout
    assert files(dest) == files(dataset)
    assert "0 errors" in run([STOKER, "verify", dest]).stdout
    pushed_again = run([STOKER, "push", dest, "s3://data/packs/train"],
                       env=env)
    assert "pushed train" in pushed_again.stdout


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A one-shard dataset of noise JPEGs, its shard over 5 MiB."""
    root = tmp_path_factory.mktemp("large")
    rng = random.Random(5)
    for i in range(11):
        cls = root / "src" / f"c{i % 2}"
        cls.mkdir(parents=True, exist_ok=True)
        pixels = rng.randbytes(700 * 700 * 3)
        out = io.BytesIO()
        Image.frombytes("RGB", (700, 700), pixels).save(out, "JPEG",
                                                        quality=95)
        (cls / f"{i}.jpg").write_bytes(out.getvalue())
    run([STOKER, "pack", root / "src", root / "ds", "--shards", 1])
    assert (root / "ds" / "shard-00000.lmdb").stat().st_size > 5 << 20
    return root / "ds"


def test_a_large_shard_goes_up_as_a_multipart_upload(tmp_path, s3, large):
    env = aws_env(tmp_path, s3)
    run([STOKER, "push", large, "s3://data/big", "--part-size", "5MiB"],
        env=env)
    requests = s3.faults.requests
    assert ("POST", "/data/big/shard-00000.lmdb?uploads=") in requests
    parts = [p for m, p in requests if m == "PUT" and "partNumber=" in p]
    assert len(parts) == 2, parts
    dest = tmp_path / "dest"
    run([STOKER, "pull", "s3://data/big", dest], env=env)
    assert files(dest) == files(large)


def test_a_wrong_secret_fails_naming_url_and_status_but_never_the_secret(
        tmp_path, s3):
    secret = "wr0ng-s3cr3t-Do-Not-Print"
    env = aws_env(tmp_path, s3, AWS_SECRET_ACCESS_KEY=secret,
                  AWS_SESSION_TOKEN="t0ken-Do-Not-Print")
    r = run([STOKER, "pull", "s3://data/packs/train", tmp_path / "dest"],
            env=env, check=False)
    assert r.returncode == 1
    assert (f"GET {s3.url}/data/packs/train/manifest.json: HTTP 403 "
            "Forbidden (SignatureDoesNotMatch") in r.stderr
    for out in (r.stdout, r.stderr):
        assert secret not in out and "t0ken-Do-Not-Print" not in out


def test_credentials_come_from_a_profile_and_are_read_again_when_refused(
        tmp_path, s3, dataset):
    creds = tmp_path / "credentials"
    good = (f"[profile ci]\naws_access_key_id = {ACCESS_KEY}\n"
            f"aws_secret_access_key = {SECRET_KEY}\n")
    creds.write_text(good)
    env = aws_env(tmp_path, s3, AWS_ACCESS_KEY_ID=None,
                  AWS_SECRET_ACCESS_KEY=None,
                  AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_PROFILE="ci")
    run([STOKER, "push", dataset, "s3://data/train"], env=env)
    # Expired credentials in the file; it is rotated while the pull runs,
    # as a credentials helper would, once the server has refused them.
    creds.write_text(good.replace(SECRET_KEY, "expired"))
    refused = []

    def rotate(why):
        refused.append(why)
        creds.write_text(good)

    s3.on_refused = rotate
    dest = tmp_path / "dest"
    run([STOKER, "pull", "s3://data/train", dest], env=env)
    assert refused == ["SignatureDoesNotMatch"]
    assert files(dest) == files(dataset)
