"""Records committed per CPU-second by the Raft core in simulation (3 voters, no faults).

    python benchmarks/raft_core.py [--records N]

The leader appends a batch every simulated millisecond while followers fetch; the figure
counts records of the whole simulated cluster (three cores, the simulated network and the
in-memory logs; the invariant checks are off) per CPU-second of this process. The baseline, measured in the same run, is the
in-memory log alone appending the same records: the ratio says what consensus costs.
"""
from __future__ import annotations

import argparse
import time

from quorum.raft.log import LogRecord, MemoryLog
from quorum.sim import Faults, Simulation


def committed_per_cpu_second(batch: int, records: int) -> tuple[float, int]:
    sim = Simulation(1, 3, 0, Faults(drop=0.0, duplicate=0.0, enabled=False, max_delay_ms=1,
                                     client_every_ms=(10**9, 10**9)), check_every_event=False)
    sim.run_until(lambda: sim.leader() is not None, 10_000, "a leader")
    leader = sim.nodes[sim.leader()]
    start_hw = leader.published_hw
    started = time.process_time()
    appended = 0
    while appended < records:
        if sim.client_append(batch) is not None:
            appended += batch
        sim.run_for(1)
    sim.run_until(lambda: leader.published_hw >= start_hw + appended, 10_000, "all committed")
    took = time.process_time() - started
    return (leader.published_hw - start_hw) / took, leader.published_hw - start_hw


def log_only_per_cpu_second(batch: int, records: int) -> float:
    log = MemoryLog()
    started = time.process_time()
    offset = 0
    while offset < records:
        log.append([LogRecord(offset + i, 1, b"v", 0) for i in range(batch)])
        log.flush()
        offset += batch
    return offset / (time.process_time() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=20_000, help="records per measurement (default 20000)")
    args = p.parse_args()
    for batch in (1, 100):
        baseline = log_only_per_cpu_second(batch, args.records)
        rate, committed = committed_per_cpu_second(batch, args.records if batch > 1 else args.records // 10)
        print(f"batch {batch:>3}: {rate:>10,.0f} records committed per CPU-second ({committed} records); "
              f"baseline in-memory log alone {baseline:>12,.0f}/CPU-s; consensus costs {baseline / rate:,.1f}x")


if __name__ == "__main__":
    main()
