"""The node's control socket, as part of `QuorumNode` (node.py): `quorum fault` sends one JSON
command a connection (pause, cut, heal, slow-disk, throttle, skew, clear, status) and reads the
node's status back."""
from __future__ import annotations

import asyncio
import json
import logging
import os

log = logging.getLogger("quorum.node.node")   # its lines are the node's


class ControlSocket:
    """QuorumNode's fault injection through its control socket, mixed into it: `self` is the node."""

    async def _start_control(self):
        path = self.config.control_path
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return await asyncio.start_unix_server(self._serve_control, path=str(path))

    async def _serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                reply = self.control(json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                reply = {"error": f"{type(e).__name__}: {e}"}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()
        finally:
            writer.close()

    def control(self, cmd: dict) -> dict:
        op = cmd["op"]
        f = self.faults
        if op == "pause":
            f.paused = True
        elif op == "resume":
            f.paused = False
        elif op == "cut":
            f.cut([int(p) for p in cmd["peers"]], cmd.get("direction", "both"))
        elif op == "heal":
            f.cut_in.clear()
            f.cut_out.clear()
        elif op == "slow-disk":
            f.slow_disk_ms = int(cmd["ms"])
        elif op == "throttle":
            f.throttle(float(cmd["records_per_s"]))
        elif op == "skew":
            f.clock_skew_ms = int(cmd["ms"])
        elif op == "clear":
            f.clear()
        elif op != "status":
            raise ValueError(f"unknown op {op!r}")
        if op != "status":
            log.warning("node %d: fault injection: %s -> %s", self.config.node_id, cmd, f.describe())
        return self.status()
