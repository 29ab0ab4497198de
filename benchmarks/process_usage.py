"""CPU and resident memory of processes, read from /proc: what a benchmark's job, broker and load
generator took. Linux only (the benchmarks run where the job's tests run)."""
from __future__ import annotations

import os
import threading

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid`, through every thread (the JVM forks its Python workers from
    threads other than its main one)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = []
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
        out += kids
        todo += kids
    return out


def rss_and_command(pid: int) -> tuple[int, str]:
    """Resident bytes and the command line; (0, "") once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        return int(fields.get("VmRSS", "0 kB").split()[0]) * 1024, cmd
    except OSError:
        return 0, ""


def proportional_bytes(pid: int) -> int:
    """The process's proportional set size: its resident pages, each shared one divided among the
    processes that share it; 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _stat_cpu_seconds(stat_path: str, reaped_children: bool = False) -> float:
    """User + system CPU seconds in a /proc `stat` file (a process's or a thread's); 0 once it
    is gone. With `reaped_children`, also those of its children that have ended and been waited
    for. The command name in it may hold spaces and parentheses: split after the last ")"."""
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLOCK_TICKS


def cpu_seconds(pid: int, reaped_children: bool = False) -> float:
    """User + system CPU seconds of one process so far (0 once it is gone); with
    `reaped_children`, also those of its children that have ended."""
    return _stat_cpu_seconds(f"/proc/{pid}/stat", reaped_children)


def task_cpu_seconds(pid: int, tid: int) -> float:
    """User + system CPU seconds so far of one thread (`tid`, its native id) of process `pid`."""
    return _stat_cpu_seconds(f"/proc/{pid}/task/{tid}/stat")


def thread_cpu_seconds(pid: int, name_prefix: str | tuple[str, ...]) -> float:
    """User + system CPU seconds so far of a process's threads whose name starts with
    `name_prefix` (one, or a tuple of them; Linux keeps the first 15 characters of a name)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    total = 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if not f.read().startswith(name_prefix):
                    continue
        except OSError:
            continue
        total += _stat_cpu_seconds(f"/proc/{pid}/task/{task}/stat")
    return total


class TreeCpu:
    """CPU seconds of a process and its descendants, minus the processes named in `exclude` and
    theirs (a benchmark's broker and load generator are its children too).

    A descendant's short-lived children count through it once they end: the JVM, without
    Hadoop's native library, runs a `chmod` process for every checkpoint file it writes, many a
    micro-batch, and none lives long enough to be read. The root's ended children do not count
    (they are the benchmark's own: a load generator that has finished). A descendant followed
    since the first reading that ends in between counts whole, through its parent."""

    def __init__(self, root: int, exclude=lambda: ()):
        self.root, self.exclude = root, exclude

    def pids(self) -> list[int]:
        excluded = set()
        for pid in self.exclude():
            if pid:
                excluded |= {pid, *descendants(pid)}
        return [p for p in [self.root, *descendants(self.root)] if p not in excluded]

    def seconds(self) -> dict[int, float]:
        return {pid: cpu_seconds(pid, reaped_children=pid != self.root) for pid in self.pids()}

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(after[p] - before.get(p, 0.0) for p in after)


class PeakMemory(threading.Thread):
    """Sampled every `interval_s`: the peak RSS of the largest Python worker, of the JVM, and of all
    of `tree`'s processes together (a `TreeCpu`'s processes, or this process's descendants); and,
    `proportional`, the peak of their proportional set sizes summed (`pss_total`: a page shared by
    several of them, as a forked Python worker shares its daemon's, counts once), with where that
    went (`breakdown`). Those read each process's page tables: only the runs that report them ask."""

    def __init__(self, tree: TreeCpu | None = None, interval_s: float = 0.2, proportional: bool = False):
        super().__init__(daemon=True)
        self.tree, self.interval_s, self.proportional = tree, interval_s, proportional
        self.python_worker = self.jvm = self.total = self.pss_total = 0
        self.at_peak: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            pids = self.tree.pids() if self.tree else descendants(os.getpid())
            total, parts = 0, {"jvm": 0, "python": 0, "workers": 0, "worker_count": 0, "other": 0}
            for pid in pids:
                rss, cmd = rss_and_command(pid)
                total += rss
                pss = proportional_bytes(pid) if self.proportional else 0
                if "java" in cmd.split(" ")[0]:
                    self.jvm = max(self.jvm, rss)
                    parts["jvm"] += pss
                elif pid != os.getpid() and "pyspark" in cmd:
                    self.python_worker = max(self.python_worker, rss)
                    parts["workers"] += pss
                    parts["worker_count"] += 1
                elif pid != os.getpid() and "python" in cmd.split(" ")[0]:
                    self.python_worker = max(self.python_worker, rss)
                    parts["python"] += pss
                else:
                    parts["other"] += pss
            self.total = max(self.total, total)
            pss_total = parts["jvm"] + parts["python"] + parts["workers"] + parts["other"]
            if pss_total > self.pss_total:
                self.pss_total, self.at_peak = pss_total, parts

    def breakdown(self) -> str:
        """Where `pss_total` went, in MB: `JVM 700 + Python 90 + 3 Python workers 260`."""
        p, mb = self.at_peak, 1000 * 1000
        if not p:
            return "not measured"
        text = f"JVM {p['jvm'] / mb:,.0f} + Python {p['python'] / mb:,.0f} + {p['worker_count']} Python workers " \
               f"{p['workers'] / mb:,.0f}"
        return text + (f" + other {p['other'] / mb:,.0f}" if p["other"] else "")

    def finish(self) -> "PeakMemory":
        self.stop.set()
        self.join()
        return self
