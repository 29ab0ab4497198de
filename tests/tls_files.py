"""Certificates for the tests of the monitor's TLS endpoints, made with `openssl` in a test's own
directory: one CA, the leaf certificates it signs (P-256 keys: fast to make), a Java keystore of
a leaf (`keytool`) for the JMX exporter agent, and bcrypt hashes for web config files."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest

KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def _run(*args: str) -> None:
    if shutil.which(args[0]) is None:
        pytest.fail(f"`{args[0]}` is not on PATH (openssl comes with the Debian package openssl, keytool "
                    f"with Java)", pytrace=False)
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        pytest.fail(f"`{' '.join(args[:3])} ...` exited {result.returncode}:\n{result.stderr}", pytrace=False)


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path


class TestCA:
    """A certificate authority in `directory`; `issue` signs a leaf for the given names."""
    __test__ = False  # not a test class, whatever its name

    def __init__(self, directory: Path, name: str = "quorum-test-ca"):
        self.directory = directory
        self.cert, self.key = directory / f"{name}.pem", directory / f"{name}-key.pem"
        _run("openssl", "req", "-x509", *KEY, "-keyout", str(self.key), "-out", str(self.cert), "-days", "2",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._issued: dict[str, tuple[str, Leaf]] = {}  # by name: a leaf is made once, never overwritten

    def issue(self, name: str, dns: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",)) -> Leaf:
        """A leaf certificate for servers and clients alike, its subject alternative names the
        given DNS names and IP addresses."""
        names = ",".join([f"DNS:{d}" for d in dns] + [f"IP:{ip}" for ip in ips])
        if name in self._issued:
            issued_names, leaf = self._issued[name]
            if issued_names != names:
                raise ValueError(f"a leaf named {name} was issued for {issued_names}, not {names}")
            return leaf
        leaf = Leaf(self.directory / f"{name}.pem", self.directory / f"{name}-key.pem")
        _run("openssl", "req", "-x509", *KEY, "-keyout", str(leaf.key), "-out", str(leaf.cert), "-days", "2",
             "-subj", f"/CN={name}", "-CA", str(self.cert), "-CAkey", str(self.key),
             "-addext", f"subjectAltName={names}", "-addext", "basicConstraints=critical,CA:FALSE",
             "-addext", "extendedKeyUsage=serverAuth,clientAuth")
        self._issued[name] = (names, leaf)
        return leaf

    def copy_to(self, directory: Path, leaf: Leaf) -> None:
        """The CA as ca.pem and the leaf as NAME.pem and NAME-key.pem in `directory`, for config
        files that name them by relative paths."""
        for name, source in (("ca.pem", self.cert), (leaf.cert.name, leaf.cert), (leaf.key.name, leaf.key)):
            (directory / name).write_bytes(source.read_bytes())

    def java_keystore(self, leaf: Leaf, alias: str, password: str) -> Path:
        """The leaf's key and chain as a JKS keystore (what Kafka shops give their JVMs)."""
        pkcs12 = leaf.cert.with_suffix(".p12")
        jks = leaf.cert.with_suffix(".jks")
        _run("openssl", "pkcs12", "-export", "-in", str(leaf.cert), "-inkey", str(leaf.key),
             "-certfile", str(self.cert), "-name", alias, "-out", str(pkcs12), "-passout", f"pass:{password}")
        _run("keytool", "-importkeystore", "-noprompt", "-srckeystore", str(pkcs12), "-srcstoretype", "PKCS12",
             "-srcstorepass", password, "-destkeystore", str(jks), "-deststoretype", "JKS",
             "-deststorepass", password)
        return jks


def bcrypt_hash(password: str) -> str:
    """A web config's `basic_auth_users` value; the least cost bcrypt takes, to keep tests fast."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
