"""Inject or clear faults on a running node, through its control socket (by default
DATA_DIR/control.sock; pass the node's config file or the socket path).

  quorum fault --config node-2.yaml pause            # no traffic in or out
  quorum fault --config node-2.yaml resume
  quorum fault --config node-1.yaml cut 2 3 --direction both
  quorum fault --config node-1.yaml heal             # remove every cut
  quorum fault --config node-3.yaml slow-disk 200    # +200 ms per fsync (0 to stop)
  quorum fault --config node-2.yaml throttle 1       # as a follower, replicate at most 1 record/s (0 to stop)
  quorum fault --config node-1.yaml skew -- -4000   # its records stamped 4 s early (0 to stop)
  quorum fault --config node-3.yaml clear            # everything back to normal
  quorum fault --config node-3.yaml status

Prints the node's status (state, leader, epoch, high watermark, faults) as JSON.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys


def send(path: str, command: dict, timeout_s: float = 5.0) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall((json.dumps(command) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", metavar="FILE", help="the node's YAML configuration")
    where.add_argument("--socket", metavar="PATH", help="the node's control socket")
    parser.add_argument("op", choices=("pause", "resume", "cut", "heal", "slow-disk", "throttle", "skew", "clear",
                                           "status"))
    parser.add_argument("values", nargs="*", type=int,
                        help="peer ids for cut; milliseconds for slow-disk and skew (negative: early; "
                             "put `--` before it); records per second for throttle")
    parser.add_argument("--direction", default="both", choices=("in", "out", "both"),
                        help="for cut: drop what the peers send (in), what we send (out), or both")


def run(args: argparse.Namespace) -> int:
    if args.config:
        from quorum.node.config import ConfigError, load
        try:
            path = str(load(args.config).control_path)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    else:
        path = args.socket
    cmd: dict = {"op": args.op}
    if args.op == "cut":
        if not args.values:
            print("error: cut needs at least one peer id", file=sys.stderr)
            return 2
        cmd.update(peers=args.values, direction=args.direction)
    elif args.op == "slow-disk":
        if len(args.values) != 1:
            print("error: slow-disk needs one value in milliseconds", file=sys.stderr)
            return 2
        cmd["ms"] = args.values[0]
    elif args.op == "skew":
        if len(args.values) != 1:
            print("error: skew needs one value in milliseconds (negative: early; 0 to stop)", file=sys.stderr)
            return 2
        cmd["ms"] = args.values[0]
    elif args.op == "throttle":
        if len(args.values) != 1 or args.values[0] < 0:
            print("error: throttle needs one value, records per second (0 to stop)", file=sys.stderr)
            return 2
        cmd["records_per_s"] = args.values[0]
    try:
        reply = send(path, cmd)
    except OSError as e:
        print(f"error: cannot reach the node's control socket {path}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(reply, indent=2))
    return 1 if "error" in reply else 0
