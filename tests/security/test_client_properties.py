"""Kafka's client properties turned into each Python client's dialect, without a Kafka: the
properties file format, the JAAS config, the stores keytool and openssl make, the refusals."""
from __future__ import annotations

import ssl

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from quorum.kafka_client import java_properties
from quorum.kafka_client import kafka_client_properties as kcp
from quorum.kafka_client.keystores import KeystoreError, key_material, trusted_certificates

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
CLIENT = "the test's client"


def sasl_ssl(certs, **extra) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="monitor" password="s3cr;et=\\"x";',
            "ssl.truststore.location": str(certs.truststore("JKS")), "ssl.truststore.password": certs.password,
            **extra}


def test_properties_files_read_as_java_reads_them(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\n"
                    "security.protocol = SASL_SSL\n"
                    "sasl.mechanism:SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    '    username="monitor" \\\n'
                    '    password="pw";\n'
                    "ssl.truststore.location /etc/kafka/trust\\u0073tore.jks\n"
                    "key\\=with\\:separators=v\\tw\n")
    props = java_properties.load(path)
    assert props == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": f'{SCRAM} required username="monitor" password="pw";',
                     "ssl.truststore.location": "/etc/kafka/truststore.jks", "key=with:separators": "v\tw"}


def test_jaas_config_quoted_values_may_hold_anything():
    module, options = kcp.parse_jaas(f'{SCRAM} required username="a b" password="p;w=\\"q\\"";')
    assert module == SCRAM and options == {"username": "a b", "password": 'p;w="q"'}
    with pytest.raises(kcp.ClientPropertiesError, match="exactly one login module"):
        kcp.parse_jaas(f'{SCRAM} required username="a"; {PLAIN} required username="b";')
    with pytest.raises(kcp.ClientPropertiesError, match="control flag"):
        kcp.parse_jaas(f'{SCRAM} username="a";')


@pytest.mark.parametrize("kind", ["JKS", "PKCS12", "PEM"])
def test_every_store_type_keytool_and_openssl_make_is_read(local_certificates, kind):
    certs = local_certificates
    assert trusted_certificates(certs.truststore(kind).read_bytes(), certs.password) == certs.ca_pem.read_text()
    material = key_material(certs.client_keystore(kind).read_bytes(), certs.password, certs.password)
    own = load_pem_private_key(certs.path("client.key").read_bytes(), None).private_numbers()
    assert load_pem_private_key(material.key_pem.encode(), None).private_numbers() == own
    assert material.chain_pem.startswith(certs.path("client.pem").read_text())


def test_a_wrong_store_password_is_said_so(local_certificates):
    certs = local_certificates
    for kind in ("JKS", "PKCS12"):
        with pytest.raises(KeystoreError, match="wrong password"):
            trusted_certificates(certs.truststore(kind).read_bytes(), "not-it")
        with pytest.raises(KeystoreError, match="wrong (key )?password"):
            key_material(certs.client_keystore(kind).read_bytes(), certs.password if kind == "JKS" else "not-it",
                         "not-it")
    # Java reads a JKS truststore without its password (the integrity is then unchecked)
    assert "BEGIN CERTIFICATE" in trusted_certificates(certs.truststore("JKS").read_bytes(), None)


def test_kafka_python_gets_sasl_and_an_ssl_context(local_certificates):
    out = kcp.kafka_python_config(sasl_ssl(local_certificates, **{"client.id": "mine"}), CLIENT)
    ctx = out.pop("ssl_context")
    assert out == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "client_id": "mine",
                   "sasl_plain_username": "monitor", "sasl_plain_password": 's3cr;et="x', "ssl_check_hostname": True}
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "quorum-monitor local CA"),),)]


def test_mutual_tls_key_is_loaded_and_no_copy_is_left(local_certificates, tmp_path, monkeypatch):
    private = tmp_path / "private"

    def private_dir() -> str:
        private.mkdir(mode=0o700)
        return str(private)
    monkeypatch.setattr(kcp, "_private_dir", private_dir)
    certs = local_certificates
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(certs.truststore("PKCS12")),
             "ssl.truststore.type": "PKCS12", "ssl.truststore.password": certs.password,
             "ssl.keystore.location": str(certs.client_keystore("JKS")), "ssl.keystore.password": certs.password,
             "ssl.endpoint.identification.algorithm": ""}
    out = kcp.kafka_python_config(props, CLIENT)
    assert out["ssl_check_hostname"] is False and out["ssl_context"].check_hostname is False
    assert not private.exists()


def test_librdkafka_gets_pem_strings_never_files(local_certificates):
    certs = local_certificates
    props = sasl_ssl(certs, **{"ssl.keystore.location": str(certs.client_keystore("PKCS12")),
                               "ssl.keystore.type": "PKCS12", "ssl.keystore.password": certs.password})
    out = kcp.librdkafka_config(props, CLIENT)
    assert out["ssl.ca.pem"] == certs.ca_pem.read_text()
    assert out["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert out["ssl.certificate.pem"].startswith(certs.path("client.pem").read_text())
    assert {k: out[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username",
                                "ssl.endpoint.identification.algorithm")} == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "monitor",
        "ssl.endpoint.identification.algorithm": "https"}
    assert not any(k.endswith(".location") for k in out)


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism: GSSAPI is not supported by the test's client.*GSSAPI when "
                                        "sasl.mechanism is not set"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config: needed"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM} required username="u" password="p";'}, "does not go with sasl.mechanism=PLAIN"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": f'{SCRAM} required username="u" password="p" tokenauth="true";'}, "tokenauth"),
    ({"security.protocol": "TLS"}, "security.protocol: 'TLS' is not one of"),
    ({"sasl.login.callback.handler.class": "x.Y"}, "sasl.login.callback.handler.class: not supported by the test's"),
    ({"ssl.endpoint.identification.algorithm": "ldap"}, "neither 'https' nor empty"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/t.jks"},
     "ssl.truststore.location: cannot read /nonexistent/t.jks for the test's client"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "BKS"}, "ssl.truststore.type: 'BKS' is not one of"),
])
def test_what_a_client_cannot_honour_is_refused_naming_key_and_client(props, message):
    with pytest.raises(kcp.ClientPropertiesError, match=message):
        kcp.kafka_python_config(props, CLIENT)


def test_a_pem_type_naming_a_jks_file_is_refused(local_certificates):
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(local_certificates.truststore("JKS")),
             "ssl.truststore.type": "PEM"}
    with pytest.raises(kcp.ClientPropertiesError, match="is not PEM, but ssl.truststore.type is PEM"):
        kcp.librdkafka_config(props, CLIENT)


def test_secrets_never_reach_an_error_or_the_redacted_view(local_certificates):
    certs = local_certificates
    props = sasl_ssl(certs, **{"ssl.truststore.password": "wrong-trust-pw", "ssl.key.password": "key-pw"})
    with pytest.raises(kcp.ClientPropertiesError) as error:
        kcp.kafka_python_config(props, CLIENT)
    for secret in ("wrong-trust-pw", "s3cr;et", "key-pw"):
        assert secret not in str(error.value)
    shown = kcp.redacted(props)
    assert shown["sasl.jaas.config"] == shown["ssl.truststore.password"] == shown["ssl.key.password"] == kcp.HIDDEN
    assert shown["ssl.truststore.location"] == props["ssl.truststore.location"]
    assert "s3cr" not in repr(kcp.security(sasl_ssl(certs), CLIENT))


def test_java_client_takes_the_properties_as_they_are_after_checking_the_files(local_certificates):
    props = sasl_ssl(local_certificates, **{"sasl.login.refresh.buffer.seconds": "300"})
    assert kcp.java_config(props, "the job's source") == props
    with pytest.raises(kcp.ClientPropertiesError, match="cannot be read here.*driver and on every executor"):
        kcp.java_config({**props, "ssl.truststore.location": "/nonexistent.jks"}, "the job's source")


def test_the_collector_refuses_unusable_client_files_at_start_with_exit_code_2(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    quorum = str(Path(sys.executable).parent / "quorum")
    base = [quorum, "collect", "--bootstrap-server", "127.0.0.1:1", "--events-bootstrap-server", "127.0.0.1:1",
            "--count", "1"]
    kafka_python_names = tmp_path / "old.properties"
    kafka_python_names.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                  "sasl.plain.username=u\nsasl.plain.password=hunter2\n")
    for extra, message in (
            (["--command-config", str(kafka_python_names)], "sasl.plain.username: not supported by quorum collect's "
                                                            "client for the watched cluster"),
            (["--events-command-config", str(tmp_path / "missing")], "missing: No such file or directory"),
            (["--node-metrics", "1=http://127.0.0.1:1/metrics", "--node-metrics-config", str(tmp_path / "missing")],
             "--node-metrics-config:")):
        out = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "hunter2" not in out.stdout + out.stderr
