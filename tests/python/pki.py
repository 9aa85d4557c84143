"""A throwaway PKI for the TLS tests, made with the openssl CLI: CAs, and
certificates they sign (EC P-256, valid two days)."""
from conftest import run


def openssl(*args, cwd):
    run(["openssl", *args], cwd=cwd)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj",
            f"/CN={name}", cwd=d)


def make_cert(d, name, ca, extensions):
    (d / f"{name}.ext").write_text(extensions)
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
            cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-out", f"{name}.pem",
            "-days", "2", "-extfile", f"{name}.ext", cwd=d)


def make_pki(d):
    """In folder `d` (made here): a CA with a server certificate (localhost, 127.0.0.1)
    and a client certificate, and another CA with a client certificate of
    its own (a stranger)."""
    d.mkdir(parents=True, exist_ok=True)
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_cert(d, "server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
              "extendedKeyUsage=serverAuth\n")
    make_cert(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    make_cert(d, "stranger", "other-ca", "extendedKeyUsage=clientAuth\n")
    return d
