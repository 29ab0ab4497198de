"""`meta.properties`: which cluster and node a data directory belongs to.

Written on first start, checked on every start, so a node pointed at another node's or
another cluster's directory stops with a clear error instead of serving foreign data.
"""
from __future__ import annotations

from pathlib import Path

from quorum.storage.atomic_file import write_atomically

FILE_NAME = "meta.properties"


class DataDirMismatch(RuntimeError):
    pass


def check_or_claim(directory: str | Path, cluster_id: str, node_id: int) -> bool:
    """Claim an empty directory or check that it is ours. Returns True when newly claimed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    if not path.exists():
        write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
        return True
    props = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    if props.get("cluster.id") != cluster_id:
        raise DataDirMismatch(f"data directory {directory} belongs to cluster {props.get('cluster.id')!r}, "
                              f"not {cluster_id!r} (see {path})")
    if props.get("node.id") != str(node_id):
        raise DataDirMismatch(f"data directory {directory} belongs to node {props.get('node.id')}, "
                              f"not node {node_id} (see {path})")
    return False
