"""Kafka's own client properties, for every Kafka client of the monitor.

Users give the monitor what they give Kafka's tools: the file `kafka-metadata-quorum
--command-config` takes, in Kafka's Java client names (`security.protocol`, `sasl.jaas.config`,
`ssl.truststore.location`, ...). The monitor's Kafka clients are three libraries, each with a
dialect of its own: kafka-python (the collector's admin client, `quorum describe`, the events
publishers), librdkafka (`quorum tail`, the job's health topic producer) and Kafka's own Java
client (Spark's connector: the job's source). This module is the one place that turns the
properties into each of them.

The Java client takes the properties as they are. For the Python clients the security settings
are read here: the JAAS config's user and password, the truststore and keystore (JKS, PKCS12 or
PEM; keystores.py) as PEM in memory. A setting a Python client cannot honour is refused, naming
the key and the client, never dropped. Secrets (passwords, JAAS configs, keys) are shown only
as `[hidden]` (`redacted`), and never appear in an error of this module.
"""
from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from quorum.kafka_client import java_properties
from quorum.kafka_client.keystores import (KeyMaterial, KeystoreError, key_material, pem_certificates, pem_key,
                                           trusted_certificates)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
              "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
              "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
STORE_TYPES = ("JKS", "PKCS12", "PEM")
# What the Python clients honour; anything else is refused for them.
PYTHON_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.endpoint.identification.algorithm", "client.id",
})
HIDDEN = "[hidden]"
_SECRET = re.compile(r"password|secret|jaas|token|credential|^ssl\.keystore\.key$", re.IGNORECASE)


class ClientPropertiesError(ValueError):
    """A property a client cannot use; the message names the key and the client, never a secret."""


def is_secret(key: str) -> bool:
    return bool(_SECRET.search(key))


def redacted(props: Mapping[str, Any]) -> dict[str, Any]:
    """The properties with every secret's value shown as `[hidden]`."""
    return {k: (HIDDEN if is_secret(str(k)) else v) for k, v in props.items()}


def load_file(path: str | Path) -> dict[str, str]:
    """A `--command-config` file's properties."""
    try:
        return java_properties.load(path)
    except OSError as e:
        raise ClientPropertiesError(f"{path}: {e.strerror or e}") from None
    except java_properties.PropertiesError as e:
        raise ClientPropertiesError(str(e)) from None


def merged(command_config: str | None, inline: Mapping[str, Any]) -> dict[str, str]:
    """A properties file's properties (none without one) overridden by `inline` ones, as
    Kafka's tools let --command-property override --command-config."""
    from_file = load_file(command_config) if command_config else {}
    return {**from_file, **{str(k): str(v) for k, v in inline.items()}}


# --- reading the security settings ----------------------------------------------------------------

@dataclass(frozen=True)
class KafkaSecurity:
    """What the Python clients need of the properties, read and checked."""
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: str | None = None              # None: the system's trusted certificates, as Java's default
    key: KeyMaterial | None = field(default=None, repr=False)
    check_hostname: bool = True
    client_id: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _jaas_tokens(text: str, where: str):
    """("sym", "=" or ";") or ("word", text): a quoted value is always a word, whatever it holds."""
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            yield "sym", c
            i += 1
        elif c == '"':
            out, i = [], i + 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                out.append(text[i])
                i += 1
            if i >= len(text):
                raise ClientPropertiesError(f"{where}: an unterminated quoted value")
            yield "word", "".join(out)
            i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            yield "word", text[i:j]
            i = j


def parse_jaas(text: str, where: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """(login module class, options) of a client's one-module JAAS config:
    `Module required user="..." password="...";`."""
    tokens = list(_jaas_tokens(text, where))
    shape = "expected 'LoginModule required key=\"value\" ...;'"
    if len(tokens) < 3 or tokens[-1] != ("sym", ";") or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ClientPropertiesError(f"{where}: {shape}")
    (_, module), (_, flag), body = tokens[0], tokens[1], tokens[2:-1]
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
        raise ClientPropertiesError(f"{where}: {flag!r} is not a JAAS control flag (required, requisite, ...)")
    if ("sym", ";") in body:
        raise ClientPropertiesError(f"{where}: a client takes exactly one login module")
    if len(body) % 3 or any(body[i][0] != "word" or body[i + 1] != ("sym", "=") or body[i + 2][0] != "word"
                            for i in range(0, len(body), 3)):
        raise ClientPropertiesError(f"{where}: {shape}")
    return module, {body[i][1]: body[i + 2][1] for i in range(0, len(body), 3)}


def _read(path: str, key: str, client: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ClientPropertiesError(f"{key}: cannot read {path} for {client}: {e.strerror or e}") from None


def _store_type(props: Mapping[str, str], key: str) -> str:
    value = props.get(key, "JKS").strip().upper()
    if value not in STORE_TYPES:
        raise ClientPropertiesError(f"{key}: {props[key]!r} is not one of {', '.join(STORE_TYPES)}")
    return value


def _truststore(props: Mapping[str, str], client: str) -> str | None:
    inline = props.get("ssl.truststore.certificates")
    location = props.get("ssl.truststore.location")
    kind = _store_type(props, "ssl.truststore.type")
    try:
        if inline:
            if kind != "PEM" or location:
                raise ClientPropertiesError("ssl.truststore.certificates: takes ssl.truststore.type=PEM and no "
                                            "ssl.truststore.location")
            return pem_certificates(inline)
        if not location:
            return None
        data = _read(location, "ssl.truststore.location", client)
        if (kind == "PEM") != (b"-----BEGIN" in data[:4096]):
            raise ClientPropertiesError(f"ssl.truststore.location: {location} is "
                                        f"{'not ' if kind == 'PEM' else ''}PEM, but ssl.truststore.type is {kind}")
        return trusted_certificates(data, props.get("ssl.truststore.password"))
    except KeystoreError as e:
        raise ClientPropertiesError(f"ssl.truststore: {location or 'ssl.truststore.certificates'}: {e}") from None


def _keystore(props: Mapping[str, str], client: str) -> KeyMaterial | None:
    location = props.get("ssl.keystore.location")
    inline_key, inline_chain = props.get("ssl.keystore.key"), props.get("ssl.keystore.certificate.chain")
    kind = _store_type(props, "ssl.keystore.type")
    key_password = props.get("ssl.key.password")
    try:
        if inline_key or inline_chain:
            if not (inline_key and inline_chain) or kind != "PEM" or location:
                raise ClientPropertiesError("ssl.keystore.key: takes ssl.keystore.certificate.chain, "
                                            "ssl.keystore.type=PEM and no ssl.keystore.location")
            return KeyMaterial(pem_key(inline_key, key_password), pem_certificates(inline_chain))
        if not location:
            return None
        data = _read(location, "ssl.keystore.location", client)
        return key_material(data, props.get("ssl.keystore.password"),
                            key_password if kind != "PEM" or key_password else props.get("ssl.keystore.password"))
    except KeystoreError as e:
        raise ClientPropertiesError(f"ssl.keystore: {location or 'ssl.keystore.key'}: {e}") from None


def security(props: Mapping[str, str], client: str) -> KafkaSecurity:
    """The properties read for a Python client (`client` names it in errors: "quorum collect's
    admin client (kafka-python)")."""
    props = {str(k): str(v) for k, v in props.items()}
    for key in props:
        if key not in PYTHON_KEYS:
            raise ClientPropertiesError(f"{key}: not supported by {client}; remove it from the properties "
                                        f"(supported: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*store.*, "
                                        f"ssl.key.password, ssl.endpoint.identification.algorithm, client.id)")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientPropertiesError(f"security.protocol: {props['security.protocol']!r} is not one of "
                                    f"{', '.join(PROTOCOLS)}")
    endpoint = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if endpoint not in ("https", ""):
        raise ClientPropertiesError(f"ssl.endpoint.identification.algorithm: {endpoint!r} is neither 'https' nor "
                                    f"empty (off)")
    sec = KafkaSecurity(protocol=protocol, check_hostname=endpoint == "https", client_id=props.get("client.id"))
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        # Kafka's default mechanism is GSSAPI (Kerberos), which the Python clients here do not speak
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise ClientPropertiesError(f"sasl.mechanism: {mechanism} is not supported by {client} "
                                        f"(supported: {', '.join(MECHANISMS)})"
                                        + ("; Kafka takes GSSAPI when sasl.mechanism is not set"
                                           if "sasl.mechanism" not in props else ""))
        if "sasl.jaas.config" not in props:
            raise ClientPropertiesError(f"sasl.jaas.config: needed for SASL {mechanism} (e.g. {MECHANISMS[mechanism]} "
                                        f"required username=\"...\" password=\"...\";)")
        module, options = parse_jaas(props["sasl.jaas.config"])
        if module != MECHANISMS[mechanism]:
            raise ClientPropertiesError(f"sasl.jaas.config: {module} does not go with sasl.mechanism={mechanism} "
                                        f"(that takes {MECHANISMS[mechanism]})")
        unknown = sorted(set(options) - {"username", "password"})
        if unknown:
            raise ClientPropertiesError(f"sasl.jaas.config: option(s) {', '.join(unknown)} not supported by {client}")
        if not options.get("username") or "password" not in options:
            raise ClientPropertiesError("sasl.jaas.config: needs username=\"...\" and password=\"...\"")
        sec = dataclasses.replace(sec, mechanism=mechanism, username=options["username"],
                                  password=options["password"])
    if protocol in ("SSL", "SASL_SSL"):
        sec = dataclasses.replace(sec, ca_pem=_truststore(props, client), key=_keystore(props, client))
    return sec


def principal(props: Mapping[str, str]) -> str | None:
    """The SASL user the properties log in as (for messages about its ACLs), if any."""
    if "sasl.jaas.config" not in props:
        return None
    try:
        return parse_jaas(props["sasl.jaas.config"])[1].get("username")
    except ClientPropertiesError:
        return None


# --- each client's dialect ------------------------------------------------------------------------

def _private_dir() -> str:
    """A directory only this user can read, in memory where the system has one (/dev/shm)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="quorum-tls-", dir=base)


def ssl_context(sec: KafkaSecurity) -> ssl.SSLContext:
    """Python's TLS context for the settings: the truststore's certificates only (as Java trusts
    its truststore only), the host name checked unless turned off, the client's own key for
    mutual TLS. `ssl` loads a key only from a file: it is written encrypted with a one-time
    password into a private directory and removed as soon as it is loaded."""
    ctx = ssl.create_default_context(cadata=sec.ca_pem) if sec.ca_pem else ssl.create_default_context()
    ctx.check_hostname = sec.check_hostname
    if sec.key is not None:
        from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption, Encoding, PrivateFormat,
                                                                  load_pem_private_key)
        one_time = secrets.token_urlsafe(24).encode()
        key = load_pem_private_key(sec.key.key_pem.encode(), None)
        encrypted = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time))
        directory = _private_dir()
        try:
            path = os.path.join(directory, "client.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(encrypted + sec.key.chain_pem.encode())
            ctx.load_cert_chain(path, password=one_time)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return ctx


def kafka_python_config(props: Mapping[str, str], client: str) -> dict[str, Any]:
    """kafka-python's keyword arguments for the properties."""
    sec = security(props, client)
    out: dict[str, Any] = {"security_protocol": sec.protocol}
    if sec.client_id:
        out["client_id"] = sec.client_id
    if sec.sasl:
        out.update(sasl_mechanism=sec.mechanism, sasl_plain_username=sec.username, sasl_plain_password=sec.password)
    if sec.tls:
        out["ssl_context"] = ssl_context(sec)
        out["ssl_check_hostname"] = sec.check_hostname
    return out


def librdkafka_config(props: Mapping[str, str], client: str) -> dict[str, Any]:
    """librdkafka's (confluent-kafka's) settings for the properties: the certificates and key as
    PEM strings, never files."""
    sec = security(props, client)
    out: dict[str, Any] = {"security.protocol": sec.protocol}
    if sec.client_id:
        out["client.id"] = sec.client_id
    if sec.sasl:
        out.update({"sasl.mechanism": sec.mechanism, "sasl.username": sec.username, "sasl.password": sec.password})
    if sec.tls:
        out["ssl.endpoint.identification.algorithm"] = "https" if sec.check_hostname else "none"
        if sec.ca_pem:
            out["ssl.ca.pem"] = sec.ca_pem
        else:
            out["ssl.ca.location"] = "probe"  # the system's certificates, wherever this system keeps them
        if sec.key is not None:
            out["ssl.key.pem"] = sec.key.key_pem
            out["ssl.certificate.pem"] = sec.key.chain_pem
    return out


def java_config(props: Mapping[str, str], client: str, check_files: bool = True) -> dict[str, str]:
    """The properties for Kafka's Java client, as they are, after the checks that need no
    Kafka: a known protocol, a JAAS config of the right shape, and (`check_files`) the stores it
    names readable here (Spark's driver reads them too)."""
    props = {str(k): str(v) for k, v in props.items()}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientPropertiesError(f"security.protocol: {props['security.protocol']!r} is not one of "
                                    f"{', '.join(PROTOCOLS)}")
    for key in ("ssl.truststore.location", "ssl.keystore.location"):
        if check_files and key in props and protocol in ("SSL", "SASL_SSL") and not os.access(props[key], os.R_OK):
            raise ClientPropertiesError(f"{key}: {props[key]} cannot be read here, and {client} reads it on the "
                                        f"driver and on every executor at this path")
    if "sasl.jaas.config" in props:
        parse_jaas(props["sasl.jaas.config"])
    return props
