"""`meta.properties`: which cluster and node a data directory belongs to.

Written on first start, checked on every start, so a node pointed at another node's or
another cluster's directory stops with a clear error instead of serving foreign data. It also
holds the directory's id (`directory.id`, as Kafka's meta.properties does, KIP-853): drawn once
when the directory is claimed, so it stays with the data and a wiped or replaced disk gets a
new one. DescribeQuorum v2 reports it per replica.
"""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

from quorum.storage.atomic_file import write_atomically

FILE_NAME = "meta.properties"
UNKNOWN_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's zero Uuid: no directory id known


class DataDirMismatch(RuntimeError):
    pass


def directory_id_text(value: object) -> str:
    """A Uuid as Kafka prints it (base64url, no padding, 22 characters) from what kafka-python
    gives (a uuid.UUID or its dashed text); None and the zero Uuid are unknown."""
    if value is None:
        return UNKNOWN_DIRECTORY_ID
    if isinstance(value, str) and len(value) == 22:
        return value
    raw = value.bytes if isinstance(value, uuid.UUID) else uuid.UUID(str(value)).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def directory_id_uuid(text: str) -> uuid.UUID:
    """The uuid.UUID kafka-python's protocol classes take, from Kafka's printed form."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def new_directory_id() -> str:
    """A random Uuid as Kafka prints it (base64url, 22 characters), avoiding what Kafka's
    Uuid.randomUuid avoids: the reserved zero and one Uuids and a leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-") and text not in (UNKNOWN_DIRECTORY_ID, "AAAAAAAAAAAAAAAAAAAAAQ"):
            return text


def _read(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


def _write(path: Path, cluster_id: str, node_id: int, directory_id: str) -> None:
    write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
                           f"directory.id={directory_id}\n".encode())


def directory_id(directory: str | Path) -> str:
    """The directory id of a claimed data directory; one is drawn and stored for a directory
    claimed before directory ids were kept."""
    path = Path(directory) / FILE_NAME
    props = _read(path)
    if not props.get("directory.id"):
        props["directory.id"] = new_directory_id()
        _write(path, props.get("cluster.id", ""), int(props.get("node.id", -1)), props["directory.id"])
    return props["directory.id"]


def check_or_claim(directory: str | Path, cluster_id: str, node_id: int) -> bool:
    """Claim an empty directory or check that it is ours. Returns True when newly claimed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    if not path.exists():
        _write(path, cluster_id, node_id, new_directory_id())
        return True
    props = _read(path)
    if props.get("cluster.id") != cluster_id:
        raise DataDirMismatch(f"data directory {directory} belongs to cluster {props.get('cluster.id')!r}, "
                              f"not {cluster_id!r} (see {path})")
    if props.get("node.id") != str(node_id):
        raise DataDirMismatch(f"data directory {directory} belongs to node {props.get('node.id')}, "
                              f"not node {node_id} (see {path})")
    return False
