"""The process's open-files limit (RLIMIT_NOFILE), raised to what a process holding many
connections needs: a collector keeps one to every node of every cluster it watches, and the
simulated fleet listens on two ports a node. Most systems start processes with a soft limit of
1,024 and a far higher hard one."""
from __future__ import annotations

import resource


def raise_soft_limit(needed: int) -> tuple[int, int]:
    """Raises the soft limit to `needed` if it is lower (never above the hard limit); returns
    (the soft limit now in force, the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft, hard
