"""The Prometheus HTTP client config file (quorum/http_client_config.py) the collector's
--node-metrics scrapes and the job's Pushgateway pushes take: what it reads, and every file it
refuses, each refusal naming the file and the key and never the password."""
from __future__ import annotations

import ssl
import subprocess

import pytest
import yaml

from quorum.config_file import ConfigFileError
from quorum.http_client_config import load_http_client_config

PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def client_files(test_ca, tmp_path_factory):
    """A directory with a client certificate, its key, the CA and a password file."""
    directory = tmp_path_factory.mktemp("client-config")
    test_ca.copy_to(directory, test_ca.issue("client"))
    (directory / "password").write_text(PASSWORD + "\n")
    return directory


def write(directory, content) -> str:
    path = directory / "client.yml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return str(path)


def test_a_full_file_is_read_with_its_paths_relative_to_its_directory(client_files):
    cfg = load_http_client_config(write(client_files, {
        "basic_auth": {"username": "monitor", "password_file": "password"},
        "tls_config": {"ca_file": "ca.pem", "cert_file": "client.pem", "key_file": "client-key.pem",
                       "server_name": "agent.example.com"}}))
    assert cfg.username == "monitor" and cfg.password == PASSWORD  # the file's newline trimmed
    assert cfg.authorization() == "Basic bW9uaXRvcjpzM2NyZXQtcHc="
    assert cfg.tls.verify_mode == ssl.CERT_REQUIRED and cfg.tls.check_hostname
    assert cfg.tls.server_name == "agent.example.com"
    assert PASSWORD not in repr(cfg)


def test_an_inline_password_and_a_skipped_verification(client_files):
    cfg = load_http_client_config(write(client_files, {"basic_auth": {"username": "monitor", "password": PASSWORD},
                                                       "tls_config": {"insecure_skip_verify": True}}))
    assert cfg.password == PASSWORD and cfg.tls.verify_mode == ssl.CERT_NONE and not cfg.tls.check_hostname


def test_an_empty_file_is_a_client_without_tls_settings_or_credentials(client_files):
    cfg = load_http_client_config(write(client_files, ""))
    assert cfg.tls is None and cfg.authorization() is None


@pytest.fixture(scope="module")
def encrypted_key(client_files):
    path = client_files / "encrypted-key.pem"
    subprocess.run(["openssl", "pkey", "-in", str(client_files / "client-key.pem"), "-aes256", "-passout",
                    "pass:key-pw", "-out", str(path)], check=True, capture_output=True)
    return path.name


@pytest.mark.parametrize("content, message", [
    ({"authorization": {"credentials": PASSWORD}}, "authorization: unknown or unsupported key"),
    ({"basic_auth": {"username": "m", "password": PASSWORD, "passwd": PASSWORD}}, "basic_auth.passwd: unknown"),
    ({"tls_config": {"ca_file": "ca.pem", "min_version": "TLS13"}}, "tls_config.min_version: unknown"),
    ({"basic_auth": {"password": PASSWORD}}, "basic_auth.username: required"),
    ({"basic_auth": {"username": "m", "password": PASSWORD, "password_file": "password"}},
     "basic_auth: give password or password_file, not both"),
    ({"basic_auth": {"username": "m", "password_file": "missing"}}, "basic_auth.password_file: .*missing is not a"),
    ({"basic_auth": {"username": "m", "password": 12345}}, "basic_auth.password: expected a string"),
    ({"tls_config": {"ca_file": "missing.pem"}}, "tls_config.ca_file: .*missing.pem is not a readable file"),
    ({"tls_config": {"ca_file": "password"}}, "tls_config.ca_file: .*no PEM certificates read"),
    ({"tls_config": {"cert_file": "client.pem"}}, "tls_config: cert_file and key_file go together"),
    ({"tls_config": {"cert_file": "client.pem", "key_file": "ca.pem"}}, "tls_config.cert_file, key_file: .*not a PEM"),
    ({"tls_config": {"cert_file": "client.pem", "key_file": "ENCRYPTED"}},
     "tls_config.key_file: .*the key is encrypted"),
    ({"tls_config": {"insecure_skip_verify": "yes"}}, "tls_config.insecure_skip_verify: expected true or false"),
    ({"basic_auth": "monitor"}, "basic_auth: expected a mapping"),
    (f"basic_auth: {{username: m, password: {PASSWORD}\n", "not valid YAML"),
])
def test_a_file_that_cannot_be_used_is_refused_naming_the_file_and_the_key_never_the_password(
        client_files, encrypted_key, content, message):
    if isinstance(content, dict) and "ENCRYPTED" in str(content):
        content["tls_config"]["key_file"] = encrypted_key
    path = write(client_files, content)
    with pytest.raises(ConfigFileError, match=message) as refused:
        load_http_client_config(path)
    assert str(refused.value).startswith(path) and PASSWORD not in str(refused.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigFileError, match=f"cannot read {tmp_path}/absent.yml: No such file"):
        load_http_client_config(tmp_path / "absent.yml")
