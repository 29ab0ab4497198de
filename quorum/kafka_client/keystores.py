"""Kafka's truststores and keystores (JKS, PKCS12, PEM) as the PEM text Python's TLS clients take.

A Java client reads `ssl.truststore.location` itself; Python's `ssl` and librdkafka take PEM.
Everything here happens in memory: the key comes out unencrypted only as a string, and what
needs a file gets a private one of its own (see kafka_client_properties.py).

JKS is read here (the `cryptography` package reads PKCS12 and PEM, not JKS): its trusted
certificates are plain DER; its private keys are under Sun's own key protection (a SHA-1
keystream keyed by the password); its integrity is a SHA-1 digest over the password, the words
"Mighty Aphrodite" and the store. `keytool` on Java 9+ writes PKCS12 unless told
`-storetype JKS`, whatever the file's name: the format is told from the bytes, not the type.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import ssl
import struct
from dataclasses import dataclass

JKS_MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
_SUN_KEY_PROTECTOR_OID = bytes.fromhex("2b060104012a02110101")  # 1.3.6.1.4.1.42.2.17.1.1


class KeystoreError(ValueError):
    pass


@dataclass(frozen=True)
class KeyMaterial:
    """A client's own key (unencrypted PKCS8 PEM) and its certificate chain (PEM), leaf first."""
    key_pem: str
    chain_pem: str


def _password_bytes(password: str) -> bytes:
    return password.encode("utf-16-be")


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise KeystoreError("truncated keystore")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        return self.take(self.u16()).decode("utf-8", "replace")

    def blob(self) -> bytes:
        return self.take(self.u32())


def _der_items(data: bytes):
    """The (tag, content) items of one DER level (enough for EncryptedPrivateKeyInfo)."""
    i = 0
    while i < len(data):
        tag, length = data[i], data[i + 1]
        i += 2
        if length & 0x80:
            n = length & 0x7F
            length = int.from_bytes(data[i:i + n], "big")
            i += n
        yield tag, data[i:i + length]
        i += length


def _unprotect_sun_key(encrypted_info: bytes, password: str) -> bytes:
    """The PKCS8 DER key inside a JKS private-key entry."""
    [(_, outer)] = list(_der_items(encrypted_info))
    (_, algorithm), (_, protected) = list(_der_items(outer))
    (_, oid), *_ = list(_der_items(algorithm))
    if oid != _SUN_KEY_PROTECTOR_OID:
        raise KeystoreError("a JKS key under an unknown protection algorithm")
    salt, body, check = protected[:20], protected[20:-20], protected[-20:]
    pw = _password_bytes(password)
    stream, digest = bytearray(), salt
    while len(stream) < len(body):
        digest = hashlib.sha1(pw + digest).digest()
        stream += digest
    key = bytes(a ^ b for a, b in zip(body, stream))
    if not hmac.compare_digest(hashlib.sha1(pw + key).digest(), check):
        raise KeystoreError("wrong key password (ssl.key.password) for the keystore's private key")
    return key


def _read_jks(data: bytes, password: str | None, key_password: str | None, keys: bool = True
              ) -> tuple[list[bytes], list[tuple[bytes, list[bytes]]]]:
    """(trusted certificates, [(key, chain)]) as DER, the store's integrity checked when a
    password is given (as Java checks it); the keys left protected unless `keys`."""
    r = _Reader(data)
    magic, version = r.u32(), r.u32()
    if magic == JCEKS_MAGIC:
        raise KeystoreError("a JCEKS keystore; convert it: keytool -importkeystore -deststoretype PKCS12")
    if magic != JKS_MAGIC or version not in (1, 2):
        raise KeystoreError("not a JKS keystore")
    trusted: list[bytes] = []
    protected_keys: list[tuple[bytes, list[bytes]]] = []
    for _ in range(r.u32()):
        tag = r.u32()
        r.utf()          # alias
        r.take(8)        # creation time
        if tag == 1:
            protected = r.blob()
            chain = []
            for _ in range(r.u32()):
                if version == 2:
                    r.utf()  # certificate type
                chain.append(r.blob())
            protected_keys.append((protected, chain))
        elif tag == 2:
            if version == 2:
                r.utf()
            trusted.append(r.blob())
        else:
            raise KeystoreError(f"unknown JKS entry type {tag}")
    body_end = r.pos
    digest = r.take(20)
    if password is not None:
        expected = hashlib.sha1(_password_bytes(password) + b"Mighty Aphrodite" + data[:body_end]).digest()
        if not hmac.compare_digest(expected, digest):
            raise KeystoreError("wrong password for the keystore (or the file is corrupt)")
    if not keys:
        return trusted, []
    kp = key_password if key_password is not None else password
    if protected_keys and kp is None:
        raise KeystoreError("the keystore holds a private key: its password is needed")
    return trusted, [(_unprotect_sun_key(k, kp), chain) for k, chain in protected_keys]


def _der_to_pem(der: bytes) -> str:
    return ssl.DER_cert_to_PEM_cert(der)


def _key_der_to_pem(der: bytes) -> str:
    body = base64.encodebytes(der).decode().replace("\n", "")
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n"


def _pem_of(cert) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding
    return cert.public_bytes(Encoding.PEM).decode()


def _unencrypted_pem(key) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()


def _format(data: bytes) -> str:
    if data[:4] in (JKS_MAGIC.to_bytes(4, "big"), JCEKS_MAGIC.to_bytes(4, "big")):
        return "JKS"
    if b"-----BEGIN" in data[:4096]:
        return "PEM"
    return "PKCS12"


def pem_certificates(text: str) -> str:
    """The certificates of a PEM text, checked to be some."""
    blocks = [b for b in text.split("-----END CERTIFICATE-----") if "-----BEGIN CERTIFICATE-----" in b]
    if not blocks:
        raise KeystoreError("no PEM certificate in it")
    return "".join(b[b.index("-----BEGIN CERTIFICATE-----"):] + "-----END CERTIFICATE-----\n" for b in blocks)


def pem_key(text: str, password: str | None) -> str:
    """A PKCS8 PEM key (encrypted with `password`, as Kafka's PEM keystores are) unencrypted."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    start = next((text.index(m) for m in ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----",
                                          "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN EC PRIVATE KEY-----")
                  if m in text), None)
    if start is None:
        raise KeystoreError("no PEM private key in it")
    try:
        key = load_pem_private_key(text[start:].encode(), password.encode() if password else None)
    except (TypeError, ValueError) as e:
        raise KeystoreError("cannot read the PEM private key (wrong ssl.key.password?)") from e
    return _unencrypted_pem(key)


def trusted_certificates(data: bytes, password: str | None) -> str:
    """Every certificate a truststore trusts (its trusted-certificate entries, as Java's trust
    manager takes them), as PEM."""
    kind = _format(data)
    if kind == "PEM":
        return pem_certificates(data.decode("utf-8", "replace"))
    if kind == "JKS":
        trusted, _ = _read_jks(data, password, None, keys=False)
        pems = [_der_to_pem(c) for c in trusted]
    else:
        pems = [_pem_of(c) for c in _pkcs12_certificates(data, password)]
    if not pems:
        raise KeystoreError("the truststore holds no certificate")
    return "".join(pems)


def _pkcs12_certificates(data: bytes, password: str | None) -> list:
    from cryptography.hazmat.primitives.serialization import pkcs12
    tries = [password.encode()] if password is not None else [None, b""]
    for pw in tries:
        try:
            store = pkcs12.load_pkcs12(data, pw)
        except ValueError:
            continue
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.insert(0, store.cert.certificate)
        return certs
    raise KeystoreError("wrong password for the PKCS12 truststore (or the file is corrupt)")


def key_material(data: bytes, password: str | None, key_password: str | None) -> KeyMaterial:
    """The one private key of a keystore and its chain."""
    kind = _format(data)
    if kind == "PEM":
        text = data.decode("utf-8", "replace")
        return KeyMaterial(pem_key(text, key_password), pem_certificates(text))
    if kind == "JKS":
        _, keys = _read_jks(data, password, key_password)
        if len(keys) != 1:
            raise KeystoreError(f"the keystore holds {len(keys)} private keys; the monitor takes one")
        key, chain = keys[0]
        return KeyMaterial(_key_der_to_pem(key), "".join(_der_to_pem(c) for c in chain))
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError as e:
        raise KeystoreError("wrong password for the PKCS12 keystore (or the file is corrupt)") from e
    if store.key is None or store.cert is None:
        raise KeystoreError("the keystore holds no private key with its certificate")
    chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    return KeyMaterial(_unencrypted_pem(store.key), "".join(_pem_of(c) for c in chain))
