"""Prometheus' HTTP client configuration file (the `basic_auth` and `tls_config` of a scrape
config), read once at start, for the monitor's own HTTP clients: the collector's --node-metrics
scrapes of JMX exporter agents and the streaming job's pushes to a Pushgateway.

    basic_auth:
      username: monitor
      password_file: /etc/quorum/agent-password   # or `password:` inline: this is a file too
    tls_config:
      ca_file: /etc/quorum/ca.pem                 # else the system's CAs
      cert_file: /etc/quorum/client.pem           # with key_file: a client certificate (mutual TLS)
      key_file: /etc/quorum/client-key.pem
      server_name: agent.example.com              # the name the server's certificate must carry
      insecure_skip_verify: false

Relative paths are read from the file's own directory, as Prometheus reads them. A key this
module does not know is refused (a typo must not silently drop TLS or credentials), and no
message ever holds a password: they name the file and the key (quorum/config_file.py).
"""
from __future__ import annotations

import base64
import http.client
import ssl
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from quorum.config_file import (ConfigFileError, bool_value, checked_keys, file_value, load_ca_certificates,
                                load_certificate_and_key, load_yaml_file, string_value)

BASIC_AUTH_KEYS = ("username", "password", "password_file")
TLS_KEYS = ("ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify")
TOP_KEYS = ("basic_auth", "tls_config")


class _ServerNameContext(ssl.SSLContext):
    """A client context that checks the server's certificate against `server_name` (and sends it
    as SNI) instead of the URL's host, as Prometheus' `tls_config.server_name` does."""
    server_name: str | None = None

    def wrap_socket(self, sock, *args, **kwargs):
        if self.server_name:
            kwargs["server_hostname"] = self.server_name
        return super().wrap_socket(sock, *args, **kwargs)


@dataclass(frozen=True)
class HttpClientConfig:
    """What one client file says: the basic auth credentials and the TLS context (None: the
    system's defaults for https URLs). `HttpClientConfig()` is a client without either."""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    source: str = ""  # the file, for messages

    def authorization(self) -> str | None:
        """The `Authorization` header's value, sent with every request (as Prometheus does,
        without waiting for a 401)."""
        if self.username is None:
            return None
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode("ascii")
        return f"Basic {token}"

    def open(self, url: str, timeout_s: float | None, method: str = "GET", data: bytes | None = None,
             headers: Iterable[tuple[str, str]] = ()) -> http.client.HTTPResponse:
        """One request; an answer of 400 or more raises urllib's HTTPError (`HTTP Error 401:
        Unauthorized`), a TLS failure a URLError naming the certificate problem."""
        request = urllib.request.Request(url, data=data, method=method)
        for name, value in headers:
            request.add_header(name, value)
        authorization = self.authorization()
        if authorization is not None:
            request.add_header("Authorization", authorization)
        # an opener per request: requests run on several threads at once
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=self.tls))
        return opener.open(request, timeout=timeout_s)


NO_CLIENT_CONFIG = HttpClientConfig()


def load_http_client_config(path: str | Path) -> HttpClientConfig:
    """Read and check the file at `path`; raises ConfigFileError naming the file and the key."""
    return load_yaml_file(path, _from_mapping)


def _from_mapping(data: Any, path: Path) -> HttpClientConfig:
    top = checked_keys(data, "", TOP_KEYS)
    username, password = _basic_auth(checked_keys(top.get("basic_auth"), "basic_auth", BASIC_AUTH_KEYS), path.parent)
    tls = None
    if top.get("tls_config") is not None:
        tls = _tls_context(checked_keys(top["tls_config"], "tls_config", TLS_KEYS), path.parent)
    return HttpClientConfig(username=username, password=password, tls=tls, source=str(path))


def _basic_auth(auth: Mapping[str, Any], base: Path) -> tuple[str | None, str | None]:
    if not auth:
        return None, None
    username = string_value(auth, "username", "basic_auth")
    if username is None:
        raise ConfigFileError("basic_auth.username: required with basic_auth")
    password = string_value(auth, "password", "basic_auth")
    password_file = file_value(auth, "password_file", "basic_auth", base)
    if password is not None and password_file is not None:
        raise ConfigFileError("basic_auth: give password or password_file, not both")
    if password_file is not None:
        try:
            password = password_file.read_text().strip()  # Prometheus trims the file's text too
        except OSError as e:
            raise ConfigFileError(f"basic_auth.password_file: cannot read {password_file}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigFileError(f"basic_auth.password_file: {password_file} is not UTF-8 text") from None
    return username, password


def _tls_context(tls: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    ca_file = file_value(tls, "ca_file", "tls_config", base)
    cert_file = file_value(tls, "cert_file", "tls_config", base)
    key_file = file_value(tls, "key_file", "tls_config", base)
    skip_verify = bool_value(tls, "insecure_skip_verify", "tls_config")
    if (cert_file is None) != (key_file is None):
        raise ConfigFileError("tls_config: cert_file and key_file go together (a client certificate)")
    context = _ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
    context.server_name = string_value(tls, "server_name", "tls_config")
    if ca_file is not None:
        load_ca_certificates(context, ca_file, "ca_file", "tls_config")
    else:
        context.load_default_certs()
    if cert_file is not None:
        load_certificate_and_key(context, cert_file, key_file, "tls_config")
    if skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
