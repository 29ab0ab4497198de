"""Opening an asyncio connection to a Kafka listener as a client configured so would: TLS, then
SaslHandshake and SaslAuthenticate, before the first request. For the project's own wire client
(quorum.kafka_client.wire_connection), which the controllers' path (`--bootstrap-controller`) runs on.

The settings are kafka-python's keyword arguments as kafka_client_properties.kafka_python_config
gives them (`security_protocol`, `ssl_context`, `sasl_mechanism`, `sasl_plain_username`, ...), so
the properties are read in one place for every client; the SASL mechanisms' messages are
kafka-python's (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). A refusal raises what
kafka_failures.name_of names: ssl.SSLError (tls_failed) or a kafka-python SASL error
(authentication_failed).
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any

from quorum.wire.codec import WireError, encode_request, read_frame, response_correlation_id

SASL_HANDSHAKE_VERSION = 1  # v1: the mechanism's messages then go in SaslAuthenticate requests
SASL_AUTHENTICATE_VERSION = 1
MAX_LOGIN_FRAME_BYTES = 1 << 16


def secured(config: dict[str, Any] | None) -> bool:
    return str((config or {}).get("security_protocol", "PLAINTEXT")).upper() != "PLAINTEXT"


class WireLogin:
    """Opens connections that are logged in; `open` is what asyncio.open_connection is to a
    PLAINTEXT listener."""

    def __init__(self, config: dict[str, Any], client_id: str):
        self.config = dict(config)
        self.client_id = client_id
        self.protocol = str(self.config.get("security_protocol", "PLAINTEXT")).upper()

    async def open(self, host: str, port: int, timeout_s: float
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to host:port, TLS shaken and SASL logged in, within `timeout_s`."""
        reader, writer = await asyncio.wait_for(self._connect(host, port, timeout_s), timeout_s)
        if self.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            try:
                await asyncio.wait_for(self._login(reader, writer, host), timeout_s)
            except BaseException:
                writer.close()
                raise
        return reader, writer

    async def _connect(self, host: str, port: int, timeout_s: float):
        if self.protocol not in ("SSL", "SASL_SSL"):
            return await asyncio.open_connection(host, port)
        try:
            return await asyncio.open_connection(host, port, ssl=self.config["ssl_context"], server_hostname=host,
                                                 ssl_handshake_timeout=max(timeout_s, 0.1))
        except (ConnectionRefusedError, ssl.SSLError, asyncio.TimeoutError):
            raise
        except OSError as e:  # a listener that closes on a TLS hello does not speak TLS
            raise ssl.SSLError(f"TLS handshake failed: {e}") from e

    async def _login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        import kafka.errors as Errors
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                         SaslHandshakeResponse)
        name = self.config["sasl_mechanism"]
        answer = await self._exchange(reader, writer, SaslHandshakeRequest(mechanism=name), SaslHandshakeResponse,
                                    SASL_HANDSHAKE_VERSION, 1)
        error = Errors.for_code(answer.error_code)
        if error is not Errors.NoError:
            raise error(f"the listener enables {answer.mechanisms}")
        mechanism = get_sasl_mechanism(name)(host=host, **self.config)
        step = 2
        while not mechanism.is_done():
            answer = await self._exchange(reader, writer, SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()),
                                          SaslAuthenticateResponse, SASL_AUTHENTICATE_VERSION, step)
            if answer.error_code:  # SASL_AUTHENTICATION_FAILED (58), as Kafka names it
                raise Errors.for_code(answer.error_code)(answer.error_message or "")
            try:
                mechanism.receive(answer.auth_bytes)
            except ValueError as e:  # a server's SCRAM message that does not prove the password
                raise Errors.SaslAuthenticationFailedError(f"the server's {name} answer: {e}") from e
            step += 1
        if not mechanism.is_authenticated():
            raise Errors.SaslAuthenticationFailedError(f"{name}: not authenticated")

    async def _exchange(self, reader, writer, request, response, version: int, correlation_id: int):
        writer.write(encode_request(request, version, correlation_id, self.client_id))
        await writer.drain()
        payload = await read_frame(reader, MAX_LOGIN_FRAME_BYTES)
        if payload is None:  # Kafka closes the connection on a login it will not take
            raise ConnectionResetError("the listener closed the connection during the SASL login")
        if response_correlation_id(payload) != correlation_id:
            raise WireError(f"an answer to request {response_correlation_id(payload)} during the SASL login")
        return response.decode(payload, version=version, header=True)
