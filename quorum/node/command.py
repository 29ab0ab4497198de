"""Run one quorum node: a Raft voter (or an observer, when its id is not among the voters)
speaking Kafka's wire protocol, with its log and quorum state in its data directory,
publishing fetch, metrics and state_change records to the events topic.

  quorum node --config node-1.yaml

SIGTERM or Ctrl-C shuts down gracefully: a leader first hands over with EndQuorumEpoch.
On start, a torn or corrupt log tail is cut off and reported. The node refuses to start
on a data directory that belongs to another cluster or node id.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from quorum.node.config import ConfigError, load, settings_help


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="the node's YAML configuration")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.epilog = settings_help()


def _dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(limit=6, file=sys.stderr)
    sys.stderr.flush()


async def serve(config, ready_line: bool = True) -> int:
    from quorum.node.node import QuorumNode
    from quorum.node.publisher import EventPublisher
    publisher = None
    if config.events_bootstrap:
        publisher = EventPublisher(config.events_bootstrap, config.events_topic,
                                   buffer_records=config.events_buffer_records, client_config=config.events_client,
                                   client_id=f"quorum-node-{config.node_id}-events",
                                   principal=config.events_principal).start()
    node = QuorumNode(config, publisher)
    await node.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR2, _dump_tasks)  # `kill -USR2 PID`: what every task awaits
    role = "voter" if config.is_voter else "observer"
    logging.getLogger("quorum.node").info("node %d (%s) listening on %s, data in %s", config.node_id, role,
                                          config.listener, config.data_dir)
    if ready_line:
        print(f"ready node={config.node_id} listener={config.listener}", flush=True)
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopper, node.stopped}, return_when=asyncio.FIRST_COMPLETED)
    failed = node.stopped.done() and node.stopped.exception() is not None
    await node.shutdown(graceful=not failed)
    if publisher is not None:
        publisher.close()
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    import faulthandler
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints every thread's stack to stderr
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load(args.config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from quorum.storage.meta import DataDirMismatch
    from quorum.storage.quorum_state_file import QuorumStateError
    try:
        return asyncio.run(serve(config))
    except (DataDirMismatch, QuorumStateError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: node {config.node_id}: {e}", file=sys.stderr)
        return 1
