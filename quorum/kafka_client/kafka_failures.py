"""Why a Kafka client could not do what it was asked, as a short low-cardinality name and a
sentence for the operator: the `error` of the collector's records, `quorum describe`'s message.

kafka-python retries a bootstrap that fails until its timeout and then says only "Unable to
bootstrap": `diagnose` then logs in once itself (kafka_login_probe.py), so that a secured
cluster that refuses the monitor is never reported as a `timeout`.
"""
from __future__ import annotations

import socket
import ssl
from typing import Any

AUTHENTICATION_FAILED = "authentication_failed"
TLS_FAILED = "tls_failed"
UNKNOWN_HOST = "unknown_host"
TIMEOUT = "timeout"
CONNECTION_REFUSED = "connection_refused"
# Kafka's error names that say the monitor's principal may not do it: the cluster is fine.
AUTHORIZATION_ERRORS = ("CLUSTER_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED")
# The failures that are the collector's own (its credentials, its trust, its name for the
# cluster): evidence about nothing but the collector.
COLLECTOR_SIDE = (AUTHENTICATION_FAILED, TLS_FAILED, UNKNOWN_HOST, "SASL_AUTHENTICATION_FAILED",
                  "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE", *AUTHORIZATION_ERRORS)

# What each principal needs (docs/deployment.md, "Secured Kafka", gives the kafka-acls commands).
NEEDED_ACL = {"CLUSTER_AUTHORIZATION_FAILED": "DESCRIBE on the CLUSTER",
              "TOPIC_AUTHORIZATION_FAILED": "access to the topic",
              "GROUP_AUTHORIZATION_FAILED": "READ on the consumer group"}


def name_of(e: BaseException) -> str | None:
    """The name of a security or name-resolution failure, or None for any other."""
    import kafka.errors as Errors
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError,
                          Errors.IllegalSaslStateError)):
            return AUTHENTICATION_FAILED
        if isinstance(e, ssl.SSLError):
            return TLS_FAILED
        if isinstance(e, socket.gaierror):
            return UNKNOWN_HOST
        text = str(e)
        if "Handshake failed" in text or "SSL" in text and ("CERTIFICATE" in text or "WRONG_VERSION" in text):
            return TLS_FAILED
        if "Authentication failed" in text or "SaslAuthenticationFailed" in text:
            return AUTHENTICATION_FAILED
        if isinstance(e, Errors.AuthorizationError):
            return getattr(e, "message", None) or "CLUSTER_AUTHORIZATION_FAILED"
        e = e.__cause__ or e.__context__
    return None


def diagnose(bootstrap: str, config: dict[str, Any], timeout_s: float) -> tuple[str, BaseException] | None:
    """(name, failure) of logging in to the first bootstrap server with kafka-python arguments
    `config`, when the login fails for a reason this module names; None when it succeeds, the
    cluster is not secured, or nothing could be told within `timeout_s`."""
    from quorum.kafka_client.kafka_login_probe import LoginProbeError, login_failure
    if config.get("security_protocol", "PLAINTEXT") == "PLAINTEXT":
        return None
    server = bootstrap.split(",")[0]
    try:
        failure = login_failure(server, config, timeout_s)
    except LoginProbeError:
        return None
    name = name_of(failure) if failure is not None else None
    return (name, failure) if name else None


def explain(name: str, principal: str | None = None, topic_acl: str | None = None) -> str:
    """A sentence for the operator on a named failure; `topic_acl`, what the client needed of
    the topic it was refused ("WRITE on the topic quorum-events")."""
    who = f"User:{principal}" if principal else "the monitor's principal"
    if name == "TOPIC_AUTHORIZATION_FAILED" and topic_acl:
        return f"authorization failed: {who} needs {topic_acl}"
    if name == AUTHENTICATION_FAILED or name in ("SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE"):
        return (f"authentication failed as {who}: a wrong user or password, or a mechanism the listener does not "
                f"enable (sasl.mechanism, sasl.jaas.config)")
    if name == "UNSUPPORTED_SASL_MECHANISM":
        return "authentication failed: the listener does not enable this sasl.mechanism"
    if name == TLS_FAILED:
        return ("TLS handshake failed: the broker's certificate is not trusted by ssl.truststore.*, its name does "
                "not match the host (ssl.endpoint.identification.algorithm), or the listener does not speak TLS "
                "(security.protocol)")
    if name in NEEDED_ACL:
        return f"authorization failed: {who} needs {NEEDED_ACL[name]} (kafka-acls --add, see docs/deployment.md)"
    if name == UNKNOWN_HOST:
        return "unknown host: the bootstrap server's name does not resolve"
    return name


def librdkafka_name(error) -> str | None:
    """The name of a librdkafka (confluent-kafka) `KafkaError` that is a security or
    name-resolution failure, or None."""
    from confluent_kafka import KafkaError as E
    code = error.code()
    if code in (E._AUTHENTICATION, E.SASL_AUTHENTICATION_FAILED, E.UNSUPPORTED_SASL_MECHANISM,
                E.ILLEGAL_SASL_STATE):
        return AUTHENTICATION_FAILED
    if code == E._SSL:
        return TLS_FAILED
    if code == E._RESOLVE:
        return UNKNOWN_HOST
    if code in (E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED):
        return error.name()
    if code == E._TRANSPORT and "SSL" in (error.str() or ""):
        return TLS_FAILED  # a TLS client on a listener that does not speak TLS
    return None


class LibrdkafkaErrors:
    """An `error_cb` for confluent-kafka clients that keeps the newest named failure (librdkafka
    reports a refused login or an untrusted certificate there, and retries on its own)."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None  # (name, librdkafka's text)

    def __call__(self, error) -> None:
        name = librdkafka_name(error)
        if name is not None:
            self.last = (name, error.str())
