"""One login to a Kafka broker as a client configured so would log in, on a blocking socket:
the TLS handshake, then SaslHandshake and SaslAuthenticate. It says why a secured Kafka refuses
the monitor when the client library cannot: after a failed login the broker closes the
connection, and kafka-python over TLS most often reports only "socket disconnected", its retry
then ends in a bootstrap timeout. A blocking read takes the broker's answer before the close.
"""
from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 1


class LoginProbeError(Exception):
    """The probe itself could not tell (the broker said nothing, or something unexpected)."""


def _exchange(sock, parser, request) -> Any:
    sock.sendall(_framed(parser, request))
    while True:
        data = sock.recv(65536)
        if not data:
            raise LoginProbeError("the broker closed the connection")
        responses = parser.receive_bytes(data)
        if responses:
            return responses[0][1]


def _framed(parser, request) -> bytes:
    parser.send_request(request)
    return parser.send_bytes()


def login_failure(server: str, config: dict[str, Any], timeout_s: float) -> BaseException | None:
    """The failure of logging in to `server` with kafka-python keyword arguments `config` (as
    kafka_client_properties.kafka_python_config gives them): an ssl.SSLError, a SASL failure
    (kafka.errors), a socket error; None when the login succeeds. Raises LoginProbeError when
    it cannot tell."""
    import kafka.errors as Errors
    from kafka.net.sasl import get_sasl_mechanism
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    host, _, port = server.strip().rpartition(":")
    host = host.strip("[]")
    protocol = config.get("security_protocol", "PLAINTEXT")
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as e:
        return e
    try:
        if protocol in ("SSL", "SASL_SSL"):
            try:
                sock = config["ssl_context"].wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, ssl.CertificateError) as e:
                return e
            except OSError as e:  # a listener that closes on a TLS hello
                return ssl.SSLError(f"TLS handshake failed: {e}")
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return None
        parser = KafkaProtocol(client_id=config.get("client_id", "quorum-login-probe"))
        handshake = SaslHandshakeRequest(mechanism=config["sasl_mechanism"])
        handshake.API_VERSION = SASL_HANDSHAKE_VERSION
        try:
            answer = _exchange(sock, parser, handshake)
        except ssl.SSLError as e:
            return e
        error = Errors.for_code(answer.error_code)
        if error is not Errors.NoError:
            return error()
        if config["sasl_mechanism"] not in answer.mechanisms:
            return Errors.UnsupportedSaslMechanismError(f"the listener enables {answer.mechanisms}")
        mechanism = get_sasl_mechanism(config["sasl_mechanism"])(host=host, **config)
        while not mechanism.is_done():
            request = SaslAuthenticateRequest(mechanism.auth_bytes())
            request.API_VERSION = SASL_AUTHENTICATE_VERSION
            answer = _exchange(sock, parser, request)
            if answer.error_code:
                return Errors.SaslAuthenticationFailedError(
                    f"{Errors.for_code(answer.error_code).__name__}: {answer.error_message}")
            mechanism.receive(answer.auth_bytes)
        return None if mechanism.is_authenticated() else Errors.SaslAuthenticationFailedError("not authenticated")
    except (socket.timeout, TimeoutError) as e:
        raise LoginProbeError(f"no answer within {timeout_s:.1f} s") from e
    except (OSError, struct.error, Errors.KafkaError) as e:
        raise LoginProbeError(str(e)) from e
    finally:
        sock.close()
