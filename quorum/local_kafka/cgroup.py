"""A process started in a cgroup (v2) of its own, from its first instruction: every socket it opens
then belongs to that cgroup, and kernel packet-filter rules can tell its traffic apart from the
other processes sending from 127.0.0.1 (deploy/packet_filter.py)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def preexec_joining(cgroup: Path | None) -> Callable[[], None] | None:
    """A `preexec_fn` for subprocess.Popen that moves the child into `cgroup` (made if missing)
    before it execs; None when there is no cgroup to join."""
    if cgroup is None:
        return None
    cgroup.mkdir(parents=True, exist_ok=True)

    def join() -> None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    return join
