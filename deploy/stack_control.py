"""The running local stack's control socket, RUN_DIR/control.sock, both ends of it: the launcher
serves it (`serve`), and `deploy/run-local chaos`, the nemesis, the incident picture and the
tests ask through `StackClient`. One JSON request per connection, one JSON reply:

    {"action": ACTION, "node": NODE, "value": VALUE}  a fault, or heal (deploy/stack_faults.py)
    {"op": "roles"}                                     who leads, follows and observes now
    -> {"ok": true|false, "message": TEXT}              (roles: JSON in the message)

`{"action": "roles"}`, the roles query's older form, is answered too. `start_stack` starts a
stack in a process of its own and returns once its control socket answers."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
SOCKET = "control.sock"
STATE_FILE = "stack.json"
LAUNCHER_LOG = "launcher.log"


def is_roles_query(request: dict) -> bool:
    return request.get("op") == "roles" or request.get("action") == "roles"


class StackClient:
    """The running stack, through RUN_DIR/control.sock and RUN_DIR/stack.json."""

    def __init__(self, run_dir: Path, timeout_s: float = 120):
        self.run_dir = Path(run_dir)
        self.timeout_s = timeout_s

    @property
    def socket_path(self) -> Path:
        return self.run_dir / SOCKET

    def serving(self) -> bool:
        return self.socket_path.exists()

    @property
    def state(self) -> dict:
        return json.loads((self.run_dir / STATE_FILE).read_text())

    def request(self, request: dict) -> tuple[bool, str]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout_s)
            s.connect(str(self.socket_path))
            s.sendall((json.dumps(request) + "\n").encode())
            reply = json.loads(s.makefile().readline())
        return reply["ok"], reply["message"]

    def ask(self, action: str, node: str | int | None = None, value: int | None = None) -> tuple[bool, str]:
        """A fault (or heal) carried out by the launcher: (done, what it says)."""
        return self.request({"action": action, "node": node, "value": value})

    def roles(self) -> dict:
        ok, message = self.request({"op": "roles"})
        if not ok:
            raise RuntimeError(message)
        return json.loads(message)


def serve(run_dir: Path, answer: Callable[[dict], str], stopping: list) -> socket.socket:
    """Answer each request with `answer(request)` (any exception: a reply that is not ok) on a
    thread of its own, until `stopping` holds something or the returned socket is closed."""
    path = run_dir / SOCKET
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)

    def loop():
        while not stopping:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                try:
                    reply = {"ok": True, "message": answer(json.loads(conn.makefile().readline()))}
                except Exception as e:  # noqa: BLE001 - the reply carries any failure to the caller
                    reply = {"ok": False, "message": str(e)}
                conn.sendall((json.dumps(reply) + "\n").encode())

    threading.Thread(target=loop, name="control", daemon=True).start()
    return server


class StackStartError(RuntimeError):
    pass


def start_stack(run_dir: Path, *flags: str, timeout_s: float) -> subprocess.Popen:
    """The launcher, `deploy/stack_launcher.py --run-dir RUN_DIR FLAGS` (FLAGS: those of
    `deploy/run-local up`), in a session of its own (its output in RUN_DIR/launcher.log),
    returned once its control socket is there and stack.json reads. A launcher that stops
    first, or is not ready in `timeout_s`, is stopped and the error carries the end of its log."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / LAUNCHER_LOG
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "deploy" / "stack_launcher.py"), "--run-dir", str(run_dir),
                                 *flags], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    client = StackClient(run_dir)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            why = f"the stack stopped (exit code {proc.returncode})"
            break
        if time.monotonic() > deadline:
            why = f"the stack did not start in {timeout_s:.0f} s"
            break
        if client.serving():
            try:
                client.state
                return proc
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
    stop_stack(proc)
    raise StackStartError(f"{why} (see {log}): {log.read_text(errors='replace')[-3000:]}")


def stop_stack(proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """SIGTERM to the launcher's session (it stops its processes in order), then wait for it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    proc.wait(timeout_s)
