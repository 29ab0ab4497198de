"""`python -m quorum.sim`: seeded runs from the command line, each failure with the command
that replays it."""
from __future__ import annotations

import argparse
import sys
import time

from quorum.sim.cluster import SimResult, Simulation, Violation
from quorum.sim.faults import Faults


def replay_command(seed: int, voters: int, observers: int, events: int) -> str:
    return f"python -m quorum.sim --seed {seed} --voters {voters} --observers {observers} --events {events}"


def run_seed(seed: int, voters: int, observers: int, events: int, validate_events: bool = False) -> SimResult:
    """One full run; a violation's message ends with the command that replays it."""
    try:
        return Simulation(seed, voters, observers, validate_events=validate_events).run(events)
    except Violation as e:
        raise Violation(f"{e}\n  replay: {replay_command(seed, voters, observers, events)}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m quorum.sim",
        description="Run the Raft core in a seeded discrete-event simulation with network and node "
                    "faults, checking the safety invariants after every event and liveness after "
                    "healing. The same arguments always replay the same run.",
        epilog="Checked after every event: at most one leader per epoch, epochs never decrease "
               "(stored and in memory), high watermarks never decrease, a majority of voters holds "
               "every offset below a leader's high watermark, committed records are the same on every "
               "node. Exit status 1 when a seed breaks one; its line names the seed and the command "
               "that replays it. Long soak: python -m quorum.sim --mixed --seeds 10000 (or "
               "QUORUM_SIM_SOAK_SEEDS=10000 pytest tests/raft/test_simulation.py -k soak -s).")
    p.add_argument("--seed", type=int, default=0, help="random seed of the run (default 0)")
    p.add_argument("--voters", type=int, default=3, help="number of voters, 1-5 are tested (default 3)")
    p.add_argument("--observers", type=int, default=0, help="number of observers (default 0)")
    p.add_argument("--events", type=int, default=3000, help="events in the fault phase (default 3000)")
    p.add_argument("--seeds", type=int, default=1,
                   help="run this many consecutive seeds starting at --seed (default 1)")
    p.add_argument("--mixed", action="store_true",
                   help="vary the shape with the seed: 1-5 voters and 0-3 observers (ignores --voters "
                        "and --observers), as the test suite and the soak do")
    p.add_argument("--no-faults", action="store_true", help="no faults at all: a healthy quorum")
    p.add_argument("--trace", action="store_true", help="print the faults injected")
    args = p.parse_args(argv)
    if args.voters < 1 or args.observers < 0 or args.events < 0 or args.seeds < 1:
        p.error("--voters must be >= 1, --observers and --events >= 0, --seeds >= 1")
    failures = 0
    started = time.process_time()
    for i, seed in enumerate(range(args.seed, args.seed + args.seeds)):
        voters, observers = (1 + i % 5, (i // 5) % 4) if args.mixed else (args.voters, args.observers)
        sim = Simulation(seed, voters, observers, Faults.none() if args.no_faults else None)
        if args.trace:
            sim.trace = []
        try:
            result = sim.run(args.events)
            print(result.summary())
        except Violation as e:
            failures += 1
            print(f"FAILED {e}\n  replay: {replay_command(seed, voters, observers, args.events)}",
                  file=sys.stderr)
        if sim.trace:
            print("\n".join(sim.trace))
    if args.seeds > 1:
        print(f"{args.seeds - failures}/{args.seeds} seeds passed in {time.process_time() - started:.1f} CPU s")
    return 1 if failures else 0
