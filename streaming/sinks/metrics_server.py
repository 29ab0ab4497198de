"""The /metrics server of an exporter with a web config (web_config.py): HTTPS when the file has
`tls_server_config`, basic auth when it has `basic_auth_users` (401 with `WWW-Authenticate`
otherwise); prometheus_client's own handler renders the registry, or, given the health
collector, the collector's kept text answers as the library would (exposition_http.py).

TLS is negotiated on each request's own thread, not on the thread that accepts connections: a
client that connects and never finishes its handshake holds one thread for at most
HANDSHAKE_TIMEOUT_S, never the server.
"""
from __future__ import annotations

import logging
import socket
import socketserver
import ssl
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client.exposition import MetricsHandler
from prometheus_client.registry import Collector

from .basic_auth import BasicAuthUsers
from .exposition_http import bake
from .prometheus_metrics import HealthCollector
from .web_config import WebConfig

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
CHALLENGE = 'Basic realm="quorum-health", charset="UTF-8"'


class _AuthenticatingHandler(MetricsHandler):
    users: BasicAuthUsers | None = None
    collector: HealthCollector | None = None
    timeout = REQUEST_TIMEOUT_S  # a connection that sends nothing is closed

    def do_GET(self) -> None:
        if self.users is not None and not self.users.allows(self.headers.get("Authorization")):
            body = b"Unauthorized\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", CHALLENGE)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.collector is None:
            super().do_GET()
            return
        # MetricsHandler.do_GET, with the body from the collector's kept text
        status, headers, output = bake(self.registry, self.collector, self.headers.get("Accept"),
                                       self.headers.get("Accept-Encoding"), parse_qs(urlparse(self.path).query))
        self.send_response(int(status.split(" ")[0]))
        for header in headers:
            self.send_header(*header)
        self.end_headers()
        self.wfile.write(output)


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def server_bind(self) -> None:
        # HTTPServer's own also looks the address up in DNS (getfqdn), which may hang for 0.0.0.0
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        with self.tls.wrap_socket(request, server_side=True) as tls_request:
            super().finish_request(tls_request, client_address)

    def handle_error(self, request, client_address) -> None:
        # a failed handshake (no certificate, an untrusted one, plain HTTP) or a client gone:
        # the client's problem, not the job's; never a traceback on stderr
        log.debug("/metrics request from %s failed", client_address[0], exc_info=True)


def start_metrics_server(host: str, port: int, registry: Collector, web_config: WebConfig,
                         collector: HealthCollector | None = None) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Serve `registry` on host:port (port 0: any free one) as `web_config` says, until the
    server's `shutdown()`; with `collector` (the registry's one collector), from its kept text."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("MetricsServer", (_MetricsServer,), {"address_family": family, "tls": web_config.tls})
    users = BasicAuthUsers(web_config.users) if web_config.users else None
    handler = type("MetricsHandler", (_AuthenticatingHandler,), {"registry": registry, "users": users,
                                                                  "collector": collector})
    server = server_class((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True)
    thread.start()
    return server, thread
