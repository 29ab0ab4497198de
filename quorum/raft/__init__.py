"""The KIP-595 Raft core as a pure, deterministic state machine (no I/O, no clock, no global
random). `RaftNode` is the entry point; storage is reached through `ReplicatedLog` and
`QuorumStateStore`; the messages are in `messages`."""
from quorum.raft.config import DEFAULT_TOPIC, RaftConfig
from quorum.raft.errors import NotLeaderError, SafetyError
from quorum.raft.log import DATA, LEADER_CHANGE, NOOP, LogRecord, MemoryLog, ReplicatedLog
from quorum.raft.messages import Errors, Message
from quorum.raft.metrics import RaftMetrics
from quorum.raft.node import RaftNode
from quorum.raft.output import Output
from quorum.raft.quorum_state_store import ElectionState, MemoryQuorumStateStore, QuorumStateStore

__all__ = ["DEFAULT_TOPIC", "RaftConfig", "DATA", "LEADER_CHANGE", "NOOP", "LogRecord", "MemoryLog",
           "ReplicatedLog", "Errors", "Message", "RaftMetrics", "NotLeaderError", "RaftNode", "SafetyError",
           "Output", "ElectionState", "MemoryQuorumStateStore", "QuorumStateStore"]
