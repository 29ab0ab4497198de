"""A quorum's valid fetch records, reduced per replica and per tick before the tracker folds them.

A busy quorum's leader writes a `fetch` record for every fetch it handles: at 500 records a
second from four fetchers, a tick of one second holds about 125 of each replica's, and the tracker
only needs what the newest of them says. Since the leader publishes its KIP-836 view of the
replica in each record (`last_fetch_timestamp_ms`, `last_caught_up_timestamp_ms`), the newest
record carries the replica's state; the ones between are redundant.

The rule, on one quorum's records in arrival order. A *run* is a replica's consecutive valid
fetches under one leader and epoch that carry the leader's view (`last_fetch_timestamp_ms` >= 0),
each caught up as of the replica's previous valid fetch (or at itself), with stamps in one tick
(`time_ms // tick_ms`) and fetch offsets that never go back. A record of another source ends
runs: a node's metrics under the same leader and epoch ends the run of the leader's newest fetch
before it; anything else (a state change, a snapshot, another leader's fetch) ends them all. Of a
run, the first and the last record are kept, each where it arrived; the ones between are dropped,
and the last says how many valid fetches it stands for (`FETCHES`: the gaps since the first) and
what those gaps come to. Every other record is kept as it is.

How each order-dependent fact survives:
  - KIP-836 caught-up times: the last record carries the leader's own result (a replica's
    caught-up time never goes back within a leader term), and the tracker takes it without
    replaying the rule over records it did not see (a replay across a dropped record could
    call a replica caught up that Kafka does not).
  - Leader claims, support, the leader's liveness, the replica's last fetch and offsets: each is
    the newest value, and the last record has the newest stamp.
  - A new epoch or leader is settled by the first record of its run, at its own time.
  - Truncations: a diverging fetch ends the run, so the valid fetch that follows it (the one
    that says where the log was cut) is a run's first record, kept; an offset that goes back
    starts a run too.
  - Fetch cadence (the `slow` cause): the last record carries what the tracker's two measures
    of the gaps it stands for come to (`GAP_PEAK_MS`, `GAP_MEAN_MS`; see `fold_gaps`), so the
    tracker ends where folding each record would have taken it.
  - The quorum's clock: it places a node's record on the quorum's time by where the leader's
    newest record has put it, and that record is kept (its run ends there).
  - Elections: a record of another leader, or a node's under another leader or epoch, ends every
    run, so what came before it is folded before it, as it came.
  - Ticks: every tick with fetches keeps at least one record per replica, so a backlog still
    crosses every tick of the quorum's clock. An evaluation that falls inside a run (in a
    backlog, read in batches longer than a tick) sees the replica as of the run's first record,
    which was caught up: the same status, with its times less than a tick older. A replica
    catching up has all of its records kept.
  - The high watermark's advance: a fetch at which it moves on after a quarter of a tick or
    more without moving is kept (it ends its run), so a stall's end is dated to the record; an
    advance dropped inside a run follows another by less than that, and the run's last record
    carries the newest value.

The collector's snapshots are summaries already (one DescribeQuorum answer each); they, metrics
and state changes are never reduced.
"""
from __future__ import annotations

from typing import Any

FETCHES = "_fetches"          # gaps since the run's first record a kept last record stands for (absent: 1)
GAP_PEAK_MS = "_gap_peak_ms"  # the fading peak of those gaps, as if it started from nothing
GAP_MEAN_MS = "_gap_mean_ms"  # their running mean, as if it started from 0
GAP_FIRST_MEAN_MS = "_gap_first_mean_ms"  # their running mean, as if the first gap started it


def peak_step(peak: int, gap: int) -> int:
    """The longest recent gap, fading by a quarter a fetch (QuorumTracker's `gap_peak_ms`)."""
    return max(gap, peak * 3 // 4)


def mean_step(mean: float, gap: float) -> float:
    """The gaps' running mean, each new gap weighing a third (QuorumTracker's `gap_ms`)."""
    return (2 * mean + gap) / 3


def fold_gaps(peak: int, mean: int, rec: dict[str, Any]) -> tuple[int, int]:
    """(gap_peak_ms, gap_ms) after a kept last record that stands for `rec[FETCHES]` gaps, from
    the values after the run's first record. The peak is exact (a quarter off the larger of two
    values is the larger of the two quarters off); the mean is within a millisecond or so of the
    record-by-record one (its rounding is done once, not at every step)."""
    k = rec[FETCHES]
    for _ in range(min(k, 64)):  # 3/4 to the 64th power: any peak has faded to nothing
        peak = peak * 3 // 4
    fresh = rec[GAP_FIRST_MEAN_MS] if mean < 0 else mean * (2 / 3) ** k + rec[GAP_MEAN_MS]
    return max(peak, rec[GAP_PEAK_MS]), int(round(fresh))


def _reducible(rec: dict[str, Any]) -> bool:
    """A valid fetch carrying the leader's view of the replica (records of writers before the
    view was published replay KIP-836 in the tracker, and need every record)."""
    return (rec["type"] == "fetch" and rec["outcome"] == "valid"
            and (rec.get("last_fetch_timestamp_ms") or -1) >= 0
            and rec.get("last_caught_up_timestamp_ms") is not None
            and rec.get(FETCHES) is None)  # reduced already: it ends the run, as it is


class _Run:
    __slots__ = ("tick", "last_at", "stamp", "offset", "fetches", "peak", "mean", "first_mean")
    # `last_at` and the gaps' measures are final once the run has ended: the kept last record is
    # copied with them once, when the batch is reduced, not at every fetch the run takes in

    def __init__(self, tick: int, stamp: int, offset: int):
        self.tick, self.stamp, self.offset = tick, stamp, offset
        self.last_at = -1  # index in the output of the run's kept last record (-1: none yet)
        self.fetches, self.peak, self.mean, self.first_mean = 0, -1, 0.0, -1.0

    def add(self, stamp: int, offset: int) -> None:
        gap = stamp - self.stamp
        if gap > 0:  # as the tracker: two fetches stamped alike make no gap
            self.fetches += 1
            self.peak = peak_step(self.peak, gap)
            self.mean = mean_step(self.mean, gap)
            self.first_mean = gap if self.first_mean < 0 else mean_step(self.first_mean, gap)
        self.stamp, self.offset = stamp, offset


def reduce_fetches(records: list[dict[str, Any]], tick_ms: int) -> list[dict[str, Any]]:
    """`records`: one quorum's records in arrival order. Returns the records kept, in the same
    order (a kept last record that stands for dropped ones is a copy, with `FETCHES` and its
    gaps' measures set)."""
    out: list[dict[str, Any] | None] = []
    runs: dict[tuple, _Run] = {}
    carried: list[_Run] = []  # runs with a kept last record (copied with FETCHES when it stands for two gaps or more)
    previous: dict[tuple, int] = {}  # each replica's previous valid fetch (its stamp) in this batch
    leader = epoch = newest = None
    hw_max, hw_at = -1, None  # the highest high watermark of the leaders' fetches so far, and when it came
    for rec in records:
        if rec["type"] == "metrics" and rec["leader_id"] == leader and rec["epoch"] == epoch:
            # A node's own record, under the leader the runs are under: the quorum's clock places
            # its stamp where the leader's newest record before it put the clock, so that record
            # stays (its run ends there); the others' runs go on.
            runs.pop(newest, None)
        elif rec["type"] != "fetch" or (runs and rec["leader_id"] != leader):
            # anything else from another source (a state change, a snapshot, another leader, a
            # node under another): every run ends here, and its last record stays
            runs.clear()
        if rec["type"] != "fetch":
            out.append(rec)
            continue
        leader, epoch = rec["leader_id"], rec["leader_epoch"]
        # the high watermark moving on after a pause: kept, so its advance is never dated late
        hw, stamp, offset = rec["high_watermark"], int(rec["time_ms"]), int(rec["fetch_offset"])
        resumed = hw > hw_max and (hw_at is None or stamp - hw_at >= tick_ms // 4)
        if hw > hw_max:
            hw_max, hw_at = hw, stamp
        key = newest = (rec["leader_id"], rec["leader_epoch"], rec["replica_id"], rec["replica_role"])
        if not _reducible(rec):
            runs.pop(key, None)
            previous.pop(key, None)
            out.append(rec)
            continue
        # caught up as of its previous fetch, or at this one: a record of a replica catching up
        # is kept (an evaluation inside a run sees the replica as of the run's first record)
        caught = rec["last_caught_up_timestamp_ms"] >= previous.get(key, stamp)
        previous[key] = stamp
        if not caught or resumed:
            runs.pop(key, None)
            out.append(rec)
            continue
        tick = stamp // tick_ms
        run = runs.get(key)
        if run is None or run.tick != tick or stamp < run.stamp or offset < run.offset:
            runs[key] = _Run(tick, stamp, offset)
            out.append(rec)
            continue
        run.add(stamp, offset)
        if run.last_at >= 0:
            out[run.last_at] = None  # superseded: the new last stands for it
        else:
            carried.append(run)
        run.last_at = len(out)
        out.append(rec)
    _stand_for_their_runs(out, carried)
    return [r for r in out if r is not None]


def _stand_for_their_runs(out: list[dict[str, Any] | None], carried: list[_Run]) -> None:
    """Each kept last record that stands for two gaps or more replaced by a copy carrying the
    run's `FETCHES` and its gaps' measures."""
    for run in carried:
        if run.fetches > 1:
            out[run.last_at] = {**out[run.last_at], FETCHES: run.fetches, GAP_PEAK_MS: run.peak,
                                GAP_MEAN_MS: run.mean, GAP_FIRST_MEAN_MS: run.first_mean}
