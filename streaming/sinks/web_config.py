"""The exporter-toolkit web config file (`sink.prometheus.exporter_web_config`): the format
Prometheus' own exporters take with `--web.config.file`, for the job's /metrics exporter.

    tls_server_config:                      # present: the exporter serves HTTPS only
      cert_file: /etc/quorum/exporter.pem
      key_file: /etc/quorum/exporter-key.pem
      client_ca_file: /etc/quorum/clients-ca.pem   # optional: client certificates (mutual TLS)
      client_auth_type: RequireAndVerifyClientCert
    basic_auth_users:                       # present: every request needs one of these users
      prometheus: $2y$10$...                # a bcrypt hash (`htpasswd -nBC 10 "" | tr -d ':'`)

Read at start; a key the exporter does not honour, a file it cannot read or a value that is not
a bcrypt hash is refused (ConfigFileError, which the job's config turns into a ConfigError).
Messages name the key, never a hash.
"""
from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from quorum.config_file import (ConfigFileError, checked_keys, file_value, load_ca_certificates,
                                load_certificate_and_key, load_yaml_file, string_value)

TOP_KEYS = ("tls_server_config", "basic_auth_users")
TLS_KEYS = ("cert_file", "key_file", "client_ca_file", "client_auth_type")
# exporter-toolkit's client_auth_type values Python's TLS can honour; it verifies every client
# certificate it asks for, so RequestClientCert and RequireAnyClientCert (unverified) cannot be
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
BCRYPT_HASH = re.compile(r"^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$")


@dataclass(frozen=True)
class WebConfig:
    """The server's TLS context (None: plain HTTP) and the users allowed in, by name, with their
    bcrypt hashes (empty: no authentication)."""
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    users: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    source: str = ""

    def describe(self) -> str:
        parts = ["HTTPS" if self.tls is not None else "HTTP"]
        if self.tls is not None and self.tls.verify_mode != ssl.CERT_NONE:
            parts.append("client certificates")
        if self.users:
            parts.append(f"basic auth for {len(self.users)} user{'s' if len(self.users) > 1 else ''}")
        return ", ".join(parts)


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check the file at `path`; raises ConfigFileError naming the file and the key."""
    return load_yaml_file(path, _from_mapping)


def _from_mapping(data: Any, path: Path) -> WebConfig:
    top = checked_keys(data, "", TOP_KEYS)
    tls = None
    if top.get("tls_server_config") is not None:
        tls = _server_context(checked_keys(top["tls_server_config"], "tls_server_config", TLS_KEYS), path.parent)
    return WebConfig(tls=tls, users=_users(top.get("basic_auth_users")), source=str(path))


def _users(value: Any) -> dict[str, bytes]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigFileError(f"basic_auth_users: expected a mapping of user to bcrypt hash, "
                              f"got {type(value).__name__}")
    users = {}
    for user, hashed in value.items():
        if not isinstance(hashed, str) or not BCRYPT_HASH.match(hashed):
            raise ConfigFileError(f"basic_auth_users.{user}: not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)")
        users[str(user)] = hashed.encode()
    return users


def _server_context(tls: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    where = "tls_server_config"
    cert_file, key_file = file_value(tls, "cert_file", where, base), file_value(tls, "key_file", where, base)
    if cert_file is None or key_file is None:
        raise ConfigFileError(f"{where}: cert_file and key_file are both required")
    client_ca_file = file_value(tls, "client_ca_file", where, base)
    auth_type = string_value(tls, "client_auth_type", where) or (
        "RequireAndVerifyClientCert" if client_ca_file is not None else "NoClientCert")
    if auth_type not in CLIENT_AUTH:
        raise ConfigFileError(f"{where}.client_auth_type: {auth_type!r} is not supported here "
                              f"(supported: {', '.join(CLIENT_AUTH)})")
    if CLIENT_AUTH[auth_type] != ssl.CERT_NONE and client_ca_file is None:
        raise ConfigFileError(f"{where}.client_auth_type: {auth_type} needs client_ca_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # exporter-toolkit's default least version
    load_certificate_and_key(context, cert_file, key_file, where)
    if client_ca_file is not None:
        load_ca_certificates(context, client_ca_file, "client_ca_file", where)
    context.verify_mode = CLIENT_AUTH[auth_type]
    return context
