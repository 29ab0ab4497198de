"""The local stack, all on loopback: the embedded Kafka-compatible broker, a quorum publishing
its events (the synthetic quorum), and a console view of the events topic.

  deploy/run-local                 start everything in the foreground; Ctrl-C stops it all
  deploy/run-local down            stop a stack started from another terminal
  deploy/run-local --duration 60   stop by itself after 60 s

Logs go to RUN_DIR/logs/, one file per process; RUN_DIR/stack.json lists what runs, so
`down` can stop it and nothing is left behind.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quorum.embedded_broker import EmbeddedBroker, free_port  # noqa: E402

EVENTS_TOPIC = "quorum-events"
STOP_TIMEOUT_S = 10


def say(text: str) -> None:
    print(f"\033[1m[stack]\033[0m {text}", file=sys.stderr, flush=True)


@dataclass
class Stack:
    run_dir: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    broker: EmbeddedBroker | None = None

    @property
    def state_file(self) -> Path:
        return self.run_dir / "stack.json"

    def log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def spawn(self, name: str, argv: list[str], console: bool = False) -> subprocess.Popen:
        """Start one process in its own session (so a stop reaches its children too)."""
        out = None if console else open(self.log(name), "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT if out else None,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        self.processes[name] = proc
        self.save()
        return proc

    def save(self) -> None:
        pids = {name: p.pid for name, p in self.processes.items()}
        if self.broker and self.broker.pid:
            pids["broker"] = self.broker.pid
        self.state_file.write_text(json.dumps({"launcher": os.getpid(), "pids": pids, "urls": self.urls}, indent=2))

    def check_alive(self) -> str | None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                return f"{name} exited with code {proc.returncode} (log: {self.log(name)})"
        return None

    def stop(self) -> None:
        for name, proc in reversed(list(self.processes.items())):
            if proc.poll() is None:
                say(f"stopping {name}")
                _terminate_group(proc.pid)
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid)
                    proc.wait()
        self.processes.clear()
        if self.broker:
            say("stopping broker")
            self.broker.stop()
            self.broker = None
        self.state_file.unlink(missing_ok=True)


def _terminate_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def up(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    stack = Stack(run_dir)
    if stack.state_file.exists():
        say(f"a stack seems to run already ({stack.state_file}); `deploy/run-local down` stops it")
        return 1
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    quorum = [sys.executable, "-m", "quorum.cli"]
    try:
        say(f"starting the embedded Kafka broker (log {stack.log('broker')})")
        stack.broker = EmbeddedBroker(port=args.broker_port or free_port(), log_path=stack.log("broker")).start()
        stack.broker.create_topic(EVENTS_TOPIC, args.partitions)
        stack.urls["kafka"] = stack.broker.bootstrap
        stack.save()
        say(f"broker ready on {stack.broker.bootstrap}, topic {EVENTS_TOPIC} ({args.partitions} partitions)")

        synth = quorum + ["synth", "--bootstrap-server", stack.broker.bootstrap, "--topic", EVENTS_TOPIC,
                          "--clusters", str(args.clusters), "--voters", str(args.voters),
                          "--observers", str(args.observers), "--seed", str(args.seed)]
        if not args.no_faults:
            synth.append("--demo-faults")
        say(f"starting the synthetic quorum: {args.clusters} cluster(s) x {args.voters} voters + "
            f"{args.observers} observer(s){'' if args.no_faults else ', demo faults from 30 s on'}")
        stack.spawn("synthetic-quorum", synth)
        if not args.quiet:
            say("console view of the events topic follows (Ctrl-C stops everything)")
            stack.spawn("console", quorum + ["tail", "--bootstrap-server", stack.broker.bootstrap,
                                             "--topic", EVENTS_TOPIC], console=True)
        say("ready:")
        for name, url in stack.urls.items():
            say(f"  {name:12} {url}")
        say(f"  logs         {run_dir / 'logs'}")
        deadline = time.monotonic() + args.duration if args.duration else None
        while not stopping and (deadline is None or time.monotonic() < deadline):
            problem = stack.check_alive()
            if problem:
                say(f"stopping: {problem}")
                return 1
            time.sleep(0.5)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        stack.stop()
        say("stopped")


def down(args: argparse.Namespace) -> int:
    state_file = Path(args.run_dir).resolve() / "stack.json"
    if not state_file.exists():
        say("no stack is running")
        return 0
    state = json.loads(state_file.read_text())
    launcher = state.get("launcher")
    try:
        os.kill(launcher, signal.SIGTERM)  # the launcher stops its processes in order
        deadline = time.monotonic() + STOP_TIMEOUT_S * 2
        while time.monotonic() < deadline and state_file.exists():
            time.sleep(0.2)
    except (ProcessLookupError, TypeError):
        pass
    for name, pid in state.get("pids", {}).items():  # whatever a dead launcher left behind
        try:
            os.kill(pid, signal.SIGKILL)
            say(f"killed leftover {name} ({pid})")
        except ProcessLookupError:
            pass
    state_file.unlink(missing_ok=True)
    say("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="deploy/run-local", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=["up", "down"], default="up")
    p.add_argument("--run-dir", default=str(ROOT / "run" / "local"), help="logs and state (default %(default)s)")
    p.add_argument("--broker-port", type=int, default=None, help="Kafka port (default: a free one)")
    p.add_argument("--partitions", type=int, default=8, help="events topic partitions (default %(default)s)")
    p.add_argument("--clusters", type=int, default=2, help="synthetic quorums (default %(default)s)")
    p.add_argument("--voters", type=int, default=3, help="voters per quorum (default %(default)s)")
    p.add_argument("--observers", type=int, default=1, help="observers per quorum (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="synthetic quorum seed (default %(default)s)")
    p.add_argument("--no-faults", action="store_true", help="a healthy quorum, no demo faults")
    p.add_argument("--quiet", action="store_true", help="no console view of the events")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    args = p.parse_args(argv)
    return up(args) if args.action == "up" else down(args)


if __name__ == "__main__":
    sys.exit(main())
