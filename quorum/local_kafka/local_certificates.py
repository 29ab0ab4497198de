"""A certificate authority and the stores a secured local Kafka and its clients use, made with
`openssl` and the JDK's `keytool`, as an operator makes them: for `deploy/run-local --secure`
and the tests.

Everything lands in one directory only its owner may read: the CA, a server key and
certificate for `localhost`/127.0.0.1 (Kafka's keystore, PKCS12), a client key and certificate
for mutual TLS, the CA as a truststore in each type Kafka takes (JKS, PKCS12, PEM), and the
client keystore as JKS and PKCS12. One random password protects every store.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from quorum import jvm

DAYS = "30"
KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]  # fast to make, as strong as RSA-3072


@dataclass(frozen=True)
class Certificates:
    directory: Path
    password: str  # of every store and key here

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_pem(self) -> Path:
        return self.path("ca.pem")

    def truststore(self, kind: str = "JKS") -> Path:
        return self.path({"JKS": "truststore.jks", "PKCS12": "truststore.p12", "PEM": "ca.pem"}[kind])

    def client_keystore(self, kind: str = "JKS") -> Path:
        return self.path({"JKS": "client.keystore.jks", "PKCS12": "client.keystore.p12",
                          "PEM": "client.keystore.pem"}[kind])

    @property
    def server_keystore(self) -> Path:
        return self.path("server.keystore.p12")

    def other_ca_truststore(self) -> Path:
        """A truststore of a CA that signed nothing here: a client with it must fail the handshake."""
        return self.path("other-truststore.jks")


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(args, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    if done.returncode != 0:  # the arguments hold no secret: passwords go through files or env
        raise RuntimeError(f"{Path(args[0]).name} {args[1]} failed (exit {done.returncode}): "
                           f"{(done.stdout + done.stderr).strip()[-500:]}")


def _keytool() -> str:
    java = Path(jvm.java()).resolve()
    tool = java.parent / "keytool"
    return str(tool) if tool.exists() else (shutil.which("keytool") or "keytool")


def _ca(d: Path, name: str, subject: str) -> None:
    _run(["openssl", "req", "-x509", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.pem",
          "-days", DAYS, "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)


def _signed(d: Path, name: str, subject: str, extensions: str) -> None:
    _run(["openssl", "req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr",
          "-subj", subject], d)
    (d / f"{name}.ext").write_text(extensions)
    _run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
          "-out", f"{name}.pem", "-days", DAYS, "-extfile", f"{name}.ext"], d)


def _pkcs12(d: Path, name: str, out: str) -> None:
    _run(["openssl", "pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}.key", "-certfile", "ca.pem",
          "-name", name, "-out", out, "-passout", "file:password"], d)


def make(directory: str | os.PathLike, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Certificates:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    password = secrets.token_urlsafe(18)
    fd = os.open(d / "password", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password)
    old_umask = os.umask(0o077)
    try:
        _ca(d, "ca", "/CN=quorum-monitor local CA")
        alt = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h for h in hosts)
        _signed(d, "server", f"/CN={hosts[0]}", f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\n")
        _signed(d, "client", "/CN=monitor-client", "extendedKeyUsage=clientAuth\n")
        _pkcs12(d, "server", "server.keystore.p12")
        _pkcs12(d, "client", "client.keystore.p12")
        # Kafka's PEM keystores take a PKCS8 key, encrypted with ssl.key.password
        _run(["openssl", "pkcs8", "-topk8", "-in", "client.key", "-out", "client.key.p8", "-passout", "file:password",
              "-v2", "aes-256-cbc"], d)
        (d / "client.keystore.pem").write_text((d / "client.key.p8").read_text() + (d / "client.pem").read_text())
        env = {**os.environ, "STORE_PASSWORD": password}
        keytool = _keytool()
        for out, kind in (("truststore.jks", "JKS"), ("truststore.p12", "PKCS12")):
            _run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", out,
                      "-storetype", kind, "-storepass:env", "STORE_PASSWORD"], d, env)
        _run([keytool, "-importkeystore", "-srckeystore", "client.keystore.p12", "-srcstoretype", "PKCS12",
                  "-srcstorepass:env", "STORE_PASSWORD", "-destkeystore", "client.keystore.jks", "-deststoretype",
                  "JKS", "-deststorepass:env", "STORE_PASSWORD", "-noprompt"], d, env)
        other = d / "other"
        other.mkdir(exist_ok=True)
        _ca(other, "ca", "/CN=some other CA")
        _run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", "other/ca.pem", "-keystore",
                  "other-truststore.jks", "-storetype", "JKS", "-storepass:env", "STORE_PASSWORD"], d, env)
    finally:
        os.umask(old_umask)
    return Certificates(d, password)

