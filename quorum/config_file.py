"""Reading the small YAML files in Prometheus' formats that the monitor takes beside its own
configuration (the HTTP client config of http_client_config.py, the exporter-toolkit web config
of streaming/sinks/web_config.py): unknown keys refused, paths read from the file's directory,
and messages that name the file and the key, never a value that may be a secret."""
from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import yaml

T = TypeVar("T")


class ConfigFileError(ValueError):
    """The file cannot be used; the message names the file and the key, never a secret."""


def load_yaml_file(path: str | Path, build: Callable[[Any, Path], T]) -> T:
    """`build(data, path)` of the file's YAML; every ConfigFileError it raises names the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigFileError(f"cannot read {path}: {e.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        # the parser's message quotes the line, which may hold a password
        raise ConfigFileError(f"{path}: not valid YAML ({type(e).__name__})") from None
    try:
        return build(data, path)
    except ConfigFileError as e:
        raise ConfigFileError(f"{path}: {e}") from None


def checked_keys(value: Any, name: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    """`value` as a mapping of known keys (None: empty); `name` is its path in the file."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigFileError(f"{name or 'the file'}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(map(str, value)) - set(known))
    if unknown:
        where = f"{name}.{unknown[0]}" if name else unknown[0]
        raise ConfigFileError(f"{where}: unknown or unsupported key (known: {', '.join(known)})")
    return value


def string_value(section: Mapping[str, Any], key: str, where: str) -> str | None:
    value = section.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigFileError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value or None


def bool_value(section: Mapping[str, Any], key: str, where: str) -> bool:
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise ConfigFileError(f"{where}.{key}: expected true or false, got {type(value).__name__}")
    return value


def file_value(section: Mapping[str, Any], key: str, where: str, base: Path) -> Path | None:
    """The file `key` names, relative to `base` (the config file's directory), which must exist."""
    value = string_value(section, key, where)
    if value is None:
        return None
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file():
        raise ConfigFileError(f"{where}.{key}: {path} is not a readable file")
    return path


def load_certificate_and_key(context: ssl.SSLContext, cert_file: Path, key_file: Path, where: str) -> None:
    """`context` presents this certificate (PEM, its chain after it) and its unencrypted key."""
    try:
        context.load_cert_chain(str(cert_file), str(key_file), password=_refuse_encrypted_key)
    except OSError as e:  # ssl.SSLError is one
        raise ConfigFileError(f"{where}.cert_file, key_file: {cert_file} and {key_file} are not a PEM "
                              f"certificate and its key ({_tls_reason(e)})") from None
    except ConfigFileError as e:
        raise ConfigFileError(f"{where}.key_file: {key_file}: {e}") from None


def load_ca_certificates(context: ssl.SSLContext, ca_file: Path, key: str, where: str) -> None:
    """`context` trusts the PEM certificates of `ca_file` (the file's `where.key`)."""
    try:
        context.load_verify_locations(cafile=str(ca_file))
    except OSError as e:
        raise ConfigFileError(f"{where}.{key}: {ca_file}: no PEM certificates read ({_tls_reason(e)})") from None


def _tls_reason(error: OSError) -> str:
    # OpenSSL's reason, or the system's for an unreadable file; never the file's contents
    return getattr(error, "reason", None) or error.strerror or type(error).__name__


def _refuse_encrypted_key() -> bytes:
    # the password callback of load_cert_chain: without one, OpenSSL prompts on the terminal
    raise ConfigFileError("the key is encrypted: the key file must hold an unencrypted PEM key")
