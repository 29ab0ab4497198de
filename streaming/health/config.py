"""Thresholds of the health state machine, with defaults taken from the quorum's own timeouts.

Every threshold is in milliseconds, like the Kafka settings it derives from
(`controller.quorum.fetch.timeout.ms` and friends, see the facts file). A threshold left unset
(None) is derived from the timeouts in `__post_init__`, so an operator who only changes
`fetch_timeout_ms` to match a cluster gets consistent thresholds everywhere.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

C = TypeVar("C")


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


def checked_section(cls: type, d: Mapping[str, Any] | None, section: str) -> Mapping[str, Any]:
    """`d` as a mapping whose keys are all fields of `cls` (None is an empty section)."""
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ConfigError(f"{section}: expected a mapping, got {type(d).__name__}")
    known = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}: unknown key (known keys: {', '.join(known)})")
    return d


def config_from_dict(cls: type[C], d: Mapping[str, Any] | None, section: str) -> C:
    """Build a frozen config dataclass from a mapping, naming the bad key on any error.

    Unknown keys are errors (a typo must not silently leave a default in place)."""
    d = checked_section(cls, d, section)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for name, value in d.items():
        expected = fields[name].type
        if value is not None and not _type_ok(expected, value):
            raise ConfigError(f"{section}.{name}: expected {expected}, got {value!r}")
        values[name] = value
    try:
        return cls(**values)
    except ConfigError as e:
        raise ConfigError(f"{section}.{e}") from None


def _type_ok(expected: str, value: Any) -> bool:
    # Dataclass annotations are strings under `from __future__ import annotations`; a union
    # ("int | str") takes a value of any of its types.
    if "|" in expected:
        return any(_type_ok(part.strip(), value) for part in expected.split("|") if part.strip() != "None")
    if expected.startswith("int"):
        return isinstance(value, int) and not isinstance(value, bool)
    if expected.startswith("float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected.startswith("bool"):
        return isinstance(value, bool)
    if expected.startswith("str"):
        return isinstance(value, str)
    if expected.startswith("dict"):
        return isinstance(value, Mapping)
    return True


@dataclass(frozen=True)
class HealthConfig:
    """Health thresholds (YAML section `health`). All times in milliseconds."""

    # --- the quorum's timeouts (Kafka defaults; set them to the monitored clusters' values) ---
    fetch_timeout_ms: int = 2000        # controller.quorum.fetch.timeout.ms
    election_timeout_ms: int = 1000     # controller.quorum.election.timeout.ms
    noop_interval_ms: int = 500         # metadata.max.idle.interval.ms (NoOps advance the HW)

    # --- replica statuses (None = derived from the timeouts) ---
    unreachable_after_ms: int | None = None   # no valid fetch this long while the leader is alive: fetch timeout
    lagging_after_ms: int | None = None       # not caught up within this long: lagging; fetch timeout
    stall_after_ms: int = 10_000              # still fetching but not caught up this long: stalled
    slow_fetch_gap_ms: int | None = None      # valid fetches this far apart on average: cause `slow`; fetch timeout / 2
    recovery_hold_ms: int | None = None       # hysteresis: a better status must hold this long; 2 x fetch timeout

    # --- quorum statuses ---
    hw_stall_after_ms: int | None = None      # high watermark not advanced this long: 4 NoOps
    leader_claim_window_ms: int | None = None  # a leadership claim counts this long: check quorum, 1.5 x fetch timeout
    storm_window_ms: int = 60_000             # election storm: this many leader changes ...
    storm_leader_changes: int = 3             # ... within storm_window_ms (split votes are not changes)
    max_epoch_jump: int = 1000                # epochs beyond current + this + 2 per election timeout: rejected

    # --- windows and bookkeeping ---
    caught_up_horizon_ms: int = 600_000       # the caught-up ratio covers this long (60 buckets)
    observer_forget_ms: int = 300_000         # an observer silent this long is forgotten (as the leader does)
    quorum_forget_ms: int = 3_600_000         # a quorum silent this long (processing time) is forgotten
    tick_ms: int = 1000                       # processing-time timer period: statuses re-evaluated at least this often
    input_stall_after_ms: int | None = None   # no input record at all this long: input stalled; fetch timeout
    # --- outputs ---
    quorum_row_refresh_ms: int = 0            # a quorum row that shows nothing new, at most this often; 0: every evaluation

    def __post_init__(self) -> None:
        derived = {
            "unreachable_after_ms": self.fetch_timeout_ms,
            "lagging_after_ms": self.fetch_timeout_ms,
            # Longer than lagging_after_ms: one caught-up fetch keeps a replica's candidate status
            # caught_up for lagging_after_ms, so a shorter hold would clear a replica that only
            # touched the leader's end once.
            "recovery_hold_ms": 2 * self.fetch_timeout_ms,
            "hw_stall_after_ms": 4 * self.noop_interval_ms,
            "leader_claim_window_ms": self.fetch_timeout_ms * 3 // 2,
            "input_stall_after_ms": self.fetch_timeout_ms,
            # A caught-up follower long-polls: a fetch at least every 500 ms when idle.
            "slow_fetch_gap_ms": self.fetch_timeout_ms // 2,
        }
        for name, value in derived.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            minimum = 0 if f.name in ("recovery_hold_ms", "quorum_row_refresh_ms") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"{f.name}: must be an integer >= {minimum} (got {value!r})")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, section: str = "health") -> "HealthConfig":
        return config_from_dict(cls, d, section)

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)
