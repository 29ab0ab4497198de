"""`quorum` with each Python thread's name given to its OS thread (prctl PR_SET_NAME, the first
15 characters), so that /proc/PID/task/*/comm tells a process's threads apart: CPython leaves
every thread named after the interpreter. fleet_collector.py runs one extra collector so, to say
where a collector's CPU goes by thread, and leaves it out of the figures.

  python benchmarks/named_threads.py collect --bootstrap-server ...
"""
from __future__ import annotations

import ctypes
import sys
import threading

PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)
_start = threading.Thread._bootstrap_inner


def _named(self: threading.Thread) -> None:
    _libc.prctl(PR_SET_NAME, self.name.encode()[:15], 0, 0, 0)
    _start(self)


threading.Thread._bootstrap_inner = _named

if __name__ == "__main__":
    from quorum.cli import main
    sys.exit(main(sys.argv[1:]))
