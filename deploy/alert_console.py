"""A webhook receiver for Alertmanager that prints each notification as one line, so the local
stack shows in its terminal what would page an operator; and keeps each notified alert as a JSON
line (`record`), so the nemesis can judge what reached the operator, not only what Prometheus
fired."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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


def notified_alerts(payload: dict, received: float) -> list[dict]:
    """Each alert of a notification as the record keeps it: when it came, firing or resolved,
    its labels and Alertmanager's `startsAt` (when Prometheus had it fire)."""
    return [{"received": received, "status": alert.get("status", payload.get("status", "?")),
             "labels": alert.get("labels", {}), "startsAt": alert.get("startsAt")}
            for alert in payload.get("alerts", [])]


class AlertConsole:
    def __init__(self, host: str, port: int, emit: Callable[[str], None], record: Path | None = None):
        emit_ = emit
        lock = threading.Lock()

        def keep(payload: dict) -> None:
            if record is None:
                return
            with lock, record.open("a") as f:
                for alert in notified_alerts(payload, time.time()):
                    f.write(json.dumps(alert) + "\n")

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    payload = json.loads(body)
                    keep(payload)
                    for line in format_notification(payload):
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
