"""Free loopback ports for the servers that tests and the local stack start.

A port is chosen below the kernel's ephemeral range. Binding port 0 hands out a port from
that range, and any outgoing connection on the machine may take the same port as its source
port between the pick and the server's own bind: a node then failed to start with "address
already in use" (seen once in CI). Below the range, only a listener can hold a port, and the
pick checks that none does. Ports handed out by this process are not handed out again.
"""
from __future__ import annotations

import random
import socket

_LOWEST = 10_000
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999   # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that no socket is bound to now, outside the ephemeral range."""
    low, _ = _ephemeral_range()
    if low - _LOWEST >= 1000:
        for _ in range(500):
            port = random.randrange(_LOWEST, low)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    with socket.socket() as s:   # no room below the range: let the kernel choose
        s.bind((host, 0))
        port = s.getsockname()[1]
    _handed_out.add(port)
    return port


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
