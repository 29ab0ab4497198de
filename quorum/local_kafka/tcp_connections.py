"""The TCP connections a process holds, read from /proc: the remote port of each established
one. With a cluster's listening ports this says which nodes a client process is connected to
(KafkaCluster.connected_nodes), which a test needs when the node it faults may be the one a
client talks to."""
from __future__ import annotations

import os
from pathlib import Path

ESTABLISHED = "01"  # the `st` column of /proc/net/tcp


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def remote_ports(pid: int) -> set[int]:
    """The remote ports of process `pid`'s established TCP connections (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:  # no IPv6
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st ... uid timeout inode
            if fields[3] == ESTABLISHED and fields[9] in inodes:
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports
