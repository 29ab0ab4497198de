"""The exporter's web config file (`sink.prometheus.exporter_web_config`, exporter-toolkit's
format) and the Pushgateway's client config file (`sink.prometheus.pushgateway_client_config`)
as the job's configuration reads them: a file that cannot be used is a ConfigError at start
naming the setting, the file and the key, and `streaming check-config` says so without printing
a hash or a password."""
from __future__ import annotations

import ssl

import pytest
import yaml

from streaming.cli import main
from streaming.config import JobConfig
from streaming.health.config import ConfigError
from streaming.sinks.web_config import load_web_config
from tls_files import bcrypt_hash

PASSWORD = "scrape-pw"
HASH = bcrypt_hash(PASSWORD)


@pytest.fixture(scope="module")
def files(test_ca, tmp_path_factory):
    directory = tmp_path_factory.mktemp("web-config")
    test_ca.copy_to(directory, test_ca.issue("exporter"))
    return directory


def write(directory, content: dict, name: str = "web.yml") -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(content))
    return str(path)


TLS = {"cert_file": "exporter.pem", "key_file": "exporter-key.pem"}


def test_tls_with_client_certificates_and_users(files):
    web = load_web_config(write(files, {"tls_server_config": {**TLS, "client_ca_file": "ca.pem"},
                                        "basic_auth_users": {"prometheus": HASH}}))
    assert web.tls.verify_mode == ssl.CERT_REQUIRED  # a client CA alone: RequireAndVerifyClientCert
    assert web.users == {"prometheus": HASH.encode()}
    assert web.describe() == "HTTPS, client certificates, basic auth for 1 user"
    assert HASH not in repr(web)


def test_tls_alone_and_users_alone(files):
    assert load_web_config(write(files, {"tls_server_config": TLS})).describe() == "HTTPS"
    assert load_web_config(write(files, {"basic_auth_users": {"p": HASH}})).describe() == "HTTP, basic auth for 1 user"
    optional = load_web_config(write(files, {"tls_server_config": {
        **TLS, "client_ca_file": "ca.pem", "client_auth_type": "VerifyClientCertIfGiven"}}))
    assert optional.tls.verify_mode == ssl.CERT_OPTIONAL


@pytest.mark.parametrize("content, message", [
    ({"http_server_config": {"http2": False}}, "http_server_config: unknown or unsupported key"),
    ({"tls_server_config": {**TLS, "cipher_suites": ["TLS_AES_128_GCM_SHA256"]}},
     "tls_server_config.cipher_suites: unknown or unsupported key"),
    ({"tls_server_config": {"cert_file": "exporter.pem"}}, "tls_server_config: cert_file and key_file are both"),
    ({"tls_server_config": {**TLS, "cert_file": "gone.pem"}}, "tls_server_config.cert_file: .*gone.pem is not a"),
    ({"tls_server_config": {**TLS, "key_file": "ca.pem"}}, "tls_server_config.cert_file, key_file: .*not a PEM"),
    ({"tls_server_config": {**TLS, "client_auth_type": "RequireAnyClientCert", "client_ca_file": "ca.pem"}},
     "tls_server_config.client_auth_type: 'RequireAnyClientCert' is not supported here"),
    ({"tls_server_config": {**TLS, "client_auth_type": "RequireAndVerifyClientCert"}},
     "tls_server_config.client_auth_type: RequireAndVerifyClientCert needs client_ca_file"),
    ({"basic_auth_users": {"prometheus": PASSWORD}}, "basic_auth_users.prometheus: not a bcrypt hash"),
    ({"basic_auth_users": {"prometheus": HASH[:-1]}}, "basic_auth_users.prometheus: not a bcrypt hash"),
    ({"basic_auth_users": ["prometheus"]}, "basic_auth_users: expected a mapping"),
])
def test_a_web_config_that_cannot_be_used_is_a_config_error_naming_the_setting_and_the_key(files, content, message):
    path = write(files, content)
    with pytest.raises(ConfigError, match=f"sink.prometheus.exporter_web_config: {path}: {message}") as refused:
        JobConfig.from_dict({"sink": {"prometheus": {"mode": "exporter", "exporter_web_config": path}}}).check_files()  # read where the job starts
    assert PASSWORD not in str(refused.value) and HASH[7:] not in str(refused.value)


def test_a_missing_web_config_and_a_bad_pushgateway_client_config_are_config_errors(files):
    with pytest.raises(ConfigError, match=f"sink.prometheus.exporter_web_config: cannot read {files}/absent.yml"):
        JobConfig.from_dict({"sink": {"prometheus": {"exporter_web_config": str(files / "absent.yml")}}}).check_files()  # read where the job starts
    path = write(files, {"basic_auth": {"username": "job", "password": PASSWORD, "passwrd_file": "x"}}, "client.yml")
    with pytest.raises(ConfigError,
                       match=f"sink.prometheus.pushgateway_client_config: {path}: basic_auth.passwrd_file"):
        JobConfig.from_dict({"sink": {"prometheus": {"pushgateway_client_config": path}}}).check_files()  # read where the job starts


def test_check_config_refuses_an_unusable_file_and_never_prints_a_hash_or_a_password(files, tmp_path, capsys):
    client = write(files, {"basic_auth": {"username": "job", "password": PASSWORD},
                           "tls_config": {"ca_file": "ca.pem"}}, "client.yml")
    good_web = write(files, {"tls_server_config": TLS, "basic_auth_users": {"prometheus": HASH}}, "good-web.yml")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"sink": {"prometheus": {
        "mode": "exporter", "exporter_web_config": good_web, "pushgateway_client_config": client}}}))
    assert main(["check-config", "--config", str(job)]) == 0
    printed = capsys.readouterr()
    assert good_web in printed.out and client in printed.out
    assert PASSWORD not in printed.out + printed.err and HASH[7:] not in printed.out + printed.err

    bad_web = write(files, {"basic_auth_users": {"prometheus": PASSWORD}}, "bad-web.yml")
    job.write_text(yaml.safe_dump({"sink": {"prometheus": {"exporter_web_config": bad_web}}}))
    assert main(["check-config", "--config", str(job)]) == 2
    printed = capsys.readouterr()
    assert "sink.prometheus.exporter_web_config" in printed.err and "basic_auth_users.prometheus" in printed.err
    assert PASSWORD not in printed.out + printed.err
