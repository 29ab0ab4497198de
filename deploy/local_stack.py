"""The local stack, all on loopback: Apache Kafka (one broker+controller node), a quorum of real node
processes (3 voters + 1 observer by default) publishing their events, the Spark streaming job on
local[*], the Pushgateway, Prometheus with the alerting rules, and Alertmanager, whose
notifications are printed here.

  deploy/run-local                     start everything in the foreground; Ctrl-C stops it all
  deploy/run-local down                stop a stack started from another terminal
  deploy/run-local status              the quorum's state and the stack's addresses
  deploy/run-local chaos ACTION [NODE] disturb the running quorum; NODE is a node id, `follower`
                                       (a voter that is not the leader, chosen for you) or `leader`:
{chaos actions}
      heal [NODE]       undo all of the above (or only what disturbs NODE)

  deploy/run-local --secure            secure the stack's Kafka (SASL_SSL with SCRAM users, TLS,
                                       StandardAuthorizer ACLs): every part runs under its own
                                       principal, from the properties files in RUN_DIR/credentials
  deploy/run-local --kafka-quorum      also run a real Apache Kafka KRaft cluster (3 controllers,
                                       1 broker, each serving its metrics through the Prometheus
                                       JMX exporter agent) with `quorum collect` watching it, so
                                       the dashboard shows a Kafka quorum beside the project's;
                                       `chaos freeze|kill|cutoff kafka-follower|kafka-leader|
                                       kafka-collector|kafka-ID` disturbs it (cutoff: packet
                                       filter, as root), `heal` mends it
  deploy/run-local nemesis --seed S --minutes M
                                       start a stack with --kafka-quorum and run a seeded schedule
                                       of overlapping faults on it, then judge every alert and
                                       verdict against the schedule (deploy/run-local nemesis -h)

The streaming job is supervised (deploy/job_supervisor.py): when it dies (a crash, an OOM kill,
`kill -9`), the launcher replaces it from its checkpoint at once by a standby it keeps ready (a
second job process with Spark started and the query planned), or starts one cold when there is
none; deaths in a row wait 1 s, doubling to at most 30 s (a death after 2 minutes of running is a
first one again). It prints why, and counts each in `quorum_monitor_job_restarts_total` on the
Pushgateway (group job="quorum_monitor_supervisor").
  deploy/run-local --synthetic 2       also publish 2 synthetic quorums with scripted faults
  deploy/run-local --fleet 500         also watch 500 simulated Kafka clusters through one fleet collector

Logs go to RUN_DIR/logs/, one file per process; RUN_DIR/stack.json says what runs and where, so
`down`, `status` and `chaos` find it, and nothing is left behind.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "deploy"))

import local_services as svc  # noqa: E402
import stack_control  # noqa: E402
import stack_faults as faults  # noqa: E402
from stack_launcher import RUN_DIR, add_arguments, up  # noqa: E402
from stack_processes import STATE_FILE, STOP_TIMEOUT_S, read_state, say  # noqa: E402


def down(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    state = read_state(run_dir)
    if state is None:
        say("no stack is running")
        return 0
    try:
        os.kill(state["launcher"], signal.SIGTERM)  # the launcher stops its processes in order
        svc.await_condition("the stack to stop", lambda: not (run_dir / STATE_FILE).exists(), STOP_TIMEOUT_S * 3)
    except (ProcessLookupError, svc.StartError):
        pass
    for name, pid in state.get("pids", {}).items():  # whatever a dead launcher left behind
        try:
            os.killpg(pid, signal.SIGKILL)
            say(f"killed leftover {name} ({pid})")
        except (ProcessLookupError, PermissionError):
            pass
    (run_dir / STATE_FILE).unlink(missing_ok=True)
    say("stopped")
    return 0


def status(args: argparse.Namespace) -> int:
    state = read_state(Path(args.run_dir).resolve())
    if state is None:
        say("no stack is running")
        return 1
    for name, url in state["urls"].items():
        print(f"{name:13} {url}")
    print(f"{'job restarts':13} {state.get('job_restarts', 0)}")
    if "quorum" in state["urls"]:
        # every node: a node that hangs costs part of the command's timeout, and another answers
        subprocess.run([sys.executable, "-m", "quorum.cli", "describe", "--bootstrap-server",
                        state["urls"]["quorum"], "--replication", "--human-readable"], cwd=ROOT)
    if "kafka-quorum" in state["urls"]:
        print("\nthe Kafka quorum (--kafka-quorum):", flush=True)
        subprocess.run([sys.executable, "-m", "quorum.cli", "describe", "--bootstrap-server",
                        state["urls"]["kafka-quorum"], "--replication", "--human-readable"], cwd=ROOT)
    return 0


def chaos(args: argparse.Namespace) -> int:
    # 90 s: events-restart waits for the events Kafka to serve again
    client = stack_control.StackClient(Path(args.run_dir).resolve(), timeout_s=90)
    if not client.serving():
        say("no stack is running (or it is still starting)")
        return 1
    ok, message = client.ask(args.chaos_action, args.node, args.value)
    print(message)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    description = __doc__.replace("{chaos actions}", faults.usage())  # each kind's own words
    p = argparse.ArgumentParser(prog="deploy/run-local", description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", default=str(RUN_DIR), help="logs and state (default %(default)s)")
    sub = p.add_subparsers(dest="action")
    p.set_defaults(action="up")
    for parser in (p, sub.add_parser("up", help="start the stack (the default)")):
        add_arguments(parser)
    sub.add_parser("down", help="stop a running stack")
    sub.add_parser("status", help="addresses and the quorum's replication state")
    c = sub.add_parser("chaos", help="disturb the running quorum (see above)")
    c.add_argument("chaos_action", choices=faults.CHOICES)
    c.add_argument("node", nargs="?", help=f"follower, leader or a node id (for {', '.join(faults.NODE_ACTIONS)}); "
                                           f"kafka-follower, kafka-leader or kafka-ID: a node of the --kafka-quorum "
                                           f"cluster (for {', '.join(faults.KAFKA_ACTIONS)}, heal)")
    c.add_argument("value", nargs="?", type=int, help="for skew: milliseconds (negative: early; after `--`)")
    sub.add_parser("nemesis", add_help=False, help="a seeded schedule of faults on a new stack, every alert judged "
                                                   "against it (deploy/run-local nemesis --help)")
    args, rest = p.parse_known_args(argv)
    if args.action == "nemesis":
        from nemesis.runner import main as nemesis
        return nemesis(rest, run_dir=args.run_dir if args.run_dir != p.get_default("run_dir") else None)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    return {"up": up, "down": down, "status": status, "chaos": chaos}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
