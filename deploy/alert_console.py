"""A webhook receiver for Alertmanager that prints each notification as one line, so the local
stack shows in its terminal what would page an operator."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


def format_notification(payload: dict) -> list[str]:
    lines = []
    for alert in payload.get("alerts", []):
        labels = alert.get("labels", {})
        where = " ".join(f"{k}={labels[k]}" for k in ("cluster", "partition", "replica") if k in labels)
        summary = alert.get("annotations", {}).get("summary", "")
        status = alert.get("status", payload.get("status", "?")).upper()
        lines.append(f"{status:8} {labels.get('severity', ''):8} {labels.get('alertname', '?')} {where} {summary}".rstrip())
    return lines


class AlertConsole:
    def __init__(self, host: str, port: int, emit: Callable[[str], None]):
        emit_ = emit

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    for line in format_notification(json.loads(body)):
                        emit_(line)
                except ValueError:
                    emit_(f"unreadable notification: {body[:200]!r}")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="alert-console", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/alerts"

    def start(self) -> "AlertConsole":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
