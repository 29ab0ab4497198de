"""The quorum-state file: what a node must remember across restarts to keep its promises
(leader id, leader epoch, the vote it gave in that epoch, the voter set).

JSON like Kafka's `quorum-state` file, replaced atomically (temp file, fsync, rename) so a
crash leaves the old or the new state, never a torn one. An unreadable file is an error
for the operator, not something to guess around: voting twice in one epoch would break
the protocol.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from quorum.storage.atomic_file import write_atomically

FILE_NAME = "quorum-state"
DATA_VERSION = 0


class QuorumStateError(RuntimeError):
    pass


@dataclass(frozen=True)
class StoredQuorumState:
    leader_id: int = -1
    leader_epoch: int = 0
    voted_id: int = -1
    voters: tuple[int, ...] = ()


class QuorumStateFile:
    def __init__(self, directory: str | Path):
        self.path = Path(directory) / FILE_NAME
        self.writes = 0

    def read(self) -> StoredQuorumState | None:
        """The stored state, or None when the node never wrote one."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            obj = json.loads(raw)
            if obj.get("data_version") != DATA_VERSION:
                raise QuorumStateError(f"{self.path}: unknown data_version {obj.get('data_version')!r}")
            return StoredQuorumState(int(obj["leaderId"]), int(obj["leaderEpoch"]), int(obj["votedId"]),
                                     tuple(int(v["voterId"]) for v in obj["currentVoters"] or ()))
        except QuorumStateError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise QuorumStateError(f"{self.path} is unreadable ({type(e).__name__}: {e}); refusing to "
                                   f"start rather than risk voting twice in one epoch") from None

    def write(self, state: StoredQuorumState) -> None:
        obj = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.leader_epoch,
               "votedId": state.voted_id, "appliedOffset": 0,
               "currentVoters": [{"voterId": v} for v in state.voters], "data_version": DATA_VERSION}
        write_atomically(self.path, json.dumps(obj, separators=(",", ":")).encode())
        self.writes += 1
