"""A /metrics answer from the health collector's kept text (exposition_cache.py), negotiated as
prometheus_client's own handler negotiates it.

The library picks the format from the Accept header (`choose_encoder`: the text format, or
OpenMetrics for Prometheus, which asks for it first) and gzips when asked. The same choice is
made here, with the same content type; the two formats our collector renders itself (every
escaping scheme that leaves our names and labels as they are) come from its `exposition`, any
other (another OpenMetrics version, the `dots` or `values` escapings, a `name[]` filter) from
the library's encoder over the registry, as before.
"""
from __future__ import annotations

import gzip
import socket
import threading
from functools import partial
from typing import Callable
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, generate_latest, gzip_accepted
from prometheus_client.openmetrics import exposition as openmetrics

from .prometheus_metrics import HealthCollector

# escapings under which the library writes our names (all legacy ones) unchanged
SAME_TEXT = {openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8}

# zlib's fastest level: a fleet's exposition (17 MB at 2,000 quorums) took 241 ms of the driver's
# CPU to compress at the library's default (9) and 34 ms at 1, for 634 KB against 464 KB
# (benchmarks/prometheus_fleet.py's exporter figures); the text repeats itself, so 1 keeps most.
GZIP_LEVEL = 1


def rendered_as(encoder: Callable) -> bool | None:
    """What our collector renders for the library's `encoder`: False the text format, True
    OpenMetrics 1.0.0, None neither (the library's encoder then renders)."""
    if encoder is generate_latest:
        return False
    if not isinstance(encoder, partial) or encoder.args or encoder.keywords.get("escaping") not in SAME_TEXT:
        return None
    if encoder.func is generate_latest and set(encoder.keywords) == {"escaping"}:
        return False
    if encoder.func is openmetrics.generate_latest and encoder.keywords.get("version") == "1.0.0":
        return True
    return None


def bake(registry: CollectorRegistry, collector: HealthCollector, accept: str | None, accept_encoding: str | None,
         params: dict[str, list[str]]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Status, headers and body of a GET of /metrics: the library's own answer for the registry
    (holding `collector` alone), from the collector's kept text where it can be."""
    encoder, content_type = choose_encoder(accept)
    openmetrics_text = rendered_as(encoder)
    if "name[]" in params:
        output = encoder(registry.restricted_registry(params["name[]"]))
    elif openmetrics_text is None:
        output = encoder(registry)
    else:
        output = collector.exposition(openmetrics_text)
    headers = [("Content-Type", content_type)]
    if gzip_accepted(accept_encoding):
        output = gzip.compress(output, compresslevel=GZIP_LEVEL)
        headers.append(("Content-Encoding", "gzip"))
    return "200 OK", headers, output


class _SilentHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:
        pass  # as the library's server: no line per scrape


def start_exposition_server(host: str, port: int, registry: CollectorRegistry, collector: HealthCollector):
    """prometheus_client's `start_http_server` for `registry`, its GETs answered by `bake`; any
    other request (OPTIONS, another method, /favicon.ico) by the library's own app."""
    library = make_wsgi_app(registry)

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] != "GET" or environ["PATH_INFO"] == "/favicon.ico":
            return library(environ, start_response)
        status, headers, output = bake(registry, collector, environ.get("HTTP_ACCEPT"),
                                       environ.get("HTTP_ACCEPT_ENCODING"), parse_qs(environ.get("QUERY_STRING", "")))
        start_response(status, headers)
        return [output]

    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server_class = type("ExpositionServer", (ThreadingWSGIServer,), {"address_family": family})
    server = make_server(sockaddr[0], port, app, server_class, handler_class=_SilentHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
