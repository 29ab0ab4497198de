"""`quorum`: the operator's command. Each subcommand lives in its own module, which defines
`add_arguments(parser)` and `run(args) -> int`; they are imported only when used, so the
node does not pay for Spark or the synthetic generator."""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "node": ("quorum.node.command", "run one quorum node (Raft over Kafka's wire protocol)"),
    "describe": ("quorum.kafka_watch.describe_tool",
                 "print a quorum's status or replication, as kafka-metadata-quorum does"),
    "collect": ("quorum.kafka_watch.collector",
                "poll DescribeQuorum of any KRaft cluster and publish quorum_snapshot records"),
    "append": ("quorum.node.append_command", "append records through a quorum's leader and print their offsets"),
    "fault": ("quorum.node.fault_command", "inject or clear faults on a running node (pause, cut off, slow disk, throttle)"),
    "synth": ("quorum.synthetic.command", "publish a synthetic quorum's events, with scripted faults"),
    "broker": ("quorum.local_kafka.broker_command",
               "run Apache Kafka (one broker+controller node) on loopback in the foreground"),
    "tail": ("quorum.tail", "print the events topic as a console view"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quorum", description="Run, inspect and exercise KRaft-style quorums: nodes, the describe tool, "
        "the DescribeQuorum collector, the synthetic quorum and a local Apache Kafka. "
        "`quorum COMMAND --help` explains each command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and module_name.startswith(e.name):
                continue  # not built yet in this checkout
            raise
        p = sub.add_parser(name, help=help_text, description=(module.__doc__ or help_text).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args._run(args) or 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
