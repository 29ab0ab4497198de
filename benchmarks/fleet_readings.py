"""What fleet_collector.py reads of the collectors it measures: each process's CPU, memory,
threads and open files from /proc, where a process's CPU went by thread, and the intervals
between each cluster's records on the events topic."""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from process_usage import cpu_seconds, proportional_bytes, rss_and_command


def status_field(pid: int, name: str) -> int:
    """An integer field of /proc/PID/status (Threads, VmRSS in kB); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


@dataclass
class ProcessReading:
    """One process at one instant."""
    cpu_s: float
    rss: int
    pss: int
    threads: int
    files: int


def read_process(pid: int, proportional: bool = False) -> ProcessReading:
    return ProcessReading(cpu_seconds(pid), rss_and_command(pid)[0], proportional_bytes(pid) if proportional else 0,
                          status_field(pid, "Threads"), open_files(pid))


@dataclass
class Peaks:
    """The most each process held over a window, sampled."""
    threads: dict[int, int] = field(default_factory=dict)
    rss: dict[int, int] = field(default_factory=dict)
    files: dict[int, int] = field(default_factory=dict)

    def sample(self, pids: list[int]) -> None:
        for pid in pids:
            r = read_process(pid)
            self.threads[pid] = max(self.threads.get(pid, 0), r.threads)
            self.rss[pid] = max(self.rss.get(pid, 0), r.rss)
            self.files[pid] = max(self.files.get(pid, 0), r.files)


# --- where a process's CPU goes, by thread ----------------------------------------------------------

def _thread_kind(name: str) -> str:
    """A thread's name without its serial numbers: `node-metrics_3` and `node-metrics_0` are one kind."""
    return re.sub(r"[-_]?\d+$", "", name.strip()) or name.strip()


def thread_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """Each live thread's (kind, CPU seconds so far)."""
    out = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = "main" if int(tid) == pid else _thread_kind(name)
        out[int(tid)] = (kind, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def cpu_by_thread_kind(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                       process_cpu_s: float) -> dict[str, float]:
    """CPU seconds between two readings by thread kind; what no live thread accounts for went to
    threads that ended in between (a collector starts one for every poll)."""
    out: dict[str, float] = defaultdict(float)
    for tid, (kind, seconds) in after.items():
        out[kind] += seconds - before.get(tid, (kind, 0.0))[1]
    out["(threads ended meanwhile)"] = max(0.0, process_cpu_s - sum(out.values()))
    return dict(out)


# --- the events topic -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    type: str
    cluster_id: str
    time_ms: int
    error: str = ""


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile; None of nothing."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def stamps(records: list[Published], clusters: set[str], kind: str, t0_ms: int, t1_ms: int) -> dict[str, list[int]]:
    """Each cluster's record times of `kind` within [t0, t1], in order."""
    times: dict[str, list[int]] = {c: [] for c in clusters}
    for r in records:
        if r.type == kind and r.cluster_id in times and t0_ms <= r.time_ms <= t1_ms:
            times[r.cluster_id].append(r.time_ms)
    return {c: sorted(ts) for c, ts in times.items()}


def intervals(times: dict[str, list[int]]) -> dict[str, list[int]]:
    """Each cluster's intervals between consecutive records."""
    return {c: [b - a for a, b in zip(ts, ts[1:])] for c, ts in times.items()}


def longest_silence(times: dict[str, list[int]], t0_ms: int, t1_ms: int) -> int:
    """The longest stretch of the window in which some cluster had no record, edges included."""
    return max((max(b - a for a, b in zip([t0_ms, *ts], [*ts, t1_ms])) for ts in times.values()), default=0)


def pooled(per_cluster: dict[str, list[int]]) -> list[int]:
    return [i for values in per_cluster.values() for i in values]
