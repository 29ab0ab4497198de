"""The health state machine of one quorum: pure Python, no Spark, no I/O.

`QuorumTracker` wraps the JSON-friendly state dict the Spark processor keeps per key:
`apply(record)` folds one event in, `evaluate(proc_ms, silent)` re-derives every status and
returns output rows (see `schema.py`). The processor calls `evaluate` on input and on every
processing-time timer tick, so a replica that stops sending loses its good status without
sending anything.

Why one tracker per quorum: a replica's status depends on the leader's view and on whether the
leader is alive, and the quorum's status on all its voters; keyed by (cluster, topic,
partition), one processor call sees all of that in its own state.

What a real quorum sends, and how each piece of evidence is judged:
- **Time.** Every record is judged on the clock that stamped it (`clocks.py`). A replica's
  fetch and caught-up times are the leader's stamps, and their ages are differences of the
  leader's stamps; a node's own metrics are compared with its own earlier metrics; only the
  question "is the leader still heard" is asked on the quorum's clock, which no single source
  can drag forward. One node's clock ahead or behind changes no other replica's verdict.
- **Epochs and leaders.** The current epoch comes from a leader claim confirmed by another voter
  (a valid fetch it served, a follower naming it) or from a majority of voters reporting it; a
  larger number alone (a candidate campaigning in ever higher epochs, one corrupt record) is an
  election in progress or a rejected record, never the current epoch. Epochs that jump beyond
  what elections could have produced are rejected (`rejected` rows, reason `implausible_epoch`).
  A majority of voters reporting a lower epoch is a new incarnation (a re-formatted cluster).
  The leader is alive while its own records arrive, or while followers that name it report a
  high watermark that advances. Leader changes, not epoch bumps, make an election storm.
- **Leaderless** needs no leader heard for `unreachable_after_ms`: a handover's gap is not one,
  and through it (old leader gone, or the new one's view not yet arrived) replicas keep their verdicts.
- **Hysteresis once.** The quorum's status is built from the replicas' unheld statuses and then
  held; the leader's own row is never held.
- **Collector path.** A DescribeQuorum snapshot is the leader's own view (its row's timestamp is
  its clock's now); a failed poll is evidence that no leader answered. A poller too slow for the
  thresholds cannot vouch for a replica: `unknown`, never `unreachable`.
- **Voter set** in force: the leader's (or a snapshot's) newest report; a change is an event.
"""
from __future__ import annotations

from typing import Any

from quorum.kafka_client import kafka_failures

from . import clocks as C
from . import reduce as R
from . import statuses as S
from . import windows as W
from .config import HealthConfig

REPLICA_WINDOW_STATE = {S.CAUGHT_UP: W.CAUGHT_UP, S.UNKNOWN: W.UNKNOWN}  # everything else: lagging
REACHABLE = (S.CAUGHT_UP, S.LAGGING, S.STALLED)
CAMPAIGNING = ("candidate", "prospective")
REFUSALS = ("fenced", "unknown_leader_epoch", "offset_out_of_range", "inconsistent_cluster_id")
SAMPLE_TREND_MS = 3000  # the lag trend of a replica that is behind is measured over the last 3-6 s
MAX_TIMES_KEPT = 64
EPOCHS_KEPT = 8
ZERO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's zero UUID, base64url: directory id unknown
COLLECTOR = "collector"
# Poll errors that say something of the quorum: nothing listens where its nodes were. Any other
# client failure (timeout, unknown_host, connection_error, ...) is the collector's path failing,
# and so is a secured cluster refusing the collector (its credentials, its trust, its ACLs),
# though that comes as an answer.
EVIDENT_POLL_ERRORS = ("connection_refused",)
NETWORK_PARTITION = "network_partition"  # the quorum's cause while its reason names a partition


def new_state(cluster_id: str, topic: str, partition: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id, "topic": topic, "partition": int(partition),
        "seq": 0, "event_seq": 0,
        "clock": C.new_clock(),
        "started_ms": -1, "last_event_ms": -1, "last_input_proc_ms": -1, "last_eval_ms": -1, "timer_ms": -1,
        "incarnation": 0,
        "epoch": -1, "epoch_first_ms": -1, "elections": 0, "epoch_changes": [],
        "leader": -1, "leader_alive_ms": -1, "leader_alive_allowance_ms": 0,
        "previous_leader": -1,  # the last epoch's leader: a partition that cut it off is named by it
        "leader_changes": 0, "leader_change_times": [],
        "view": None,      # the current leader's view: node, epoch, stamp/q (its clock's now), since, via
        "claims": {},      # str(epoch) -> {str(node): quorum ms of its last claim}
        "support": {},     # str(epoch) -> {str(leader): {str(voter): quorum ms}}
        "reports": {},     # str(node) -> [epoch, state, leader, quorum ms, high watermark]
        "hw": -1, "hw_advanced_ms": -1, "leader_leo": -1,
        "voter_set": None, "voter_set_changes": 0,
        "poll": None,      # the collector's last poll: interval, ok_ms, failures, error, blind, answered_by
        "nodes_heard_ms": -1,   # the last record a node wrote itself (fetch, metrics, state change)
        "fetch_publishers": [],  # nodes seen publishing the fetches they answer (this project's)
        "replicas": {},
        "status": None,
    }


def _new_replica(role: str) -> dict[str, Any]:
    # Fetch and caught-up times are the current leader's clock stamps (see `view`).
    return {"role": role, "dir": None, "leo": -1, "fetch_leader_leo": -1, "last_fetch": -1, "last_caught_up": -1,
            "first_fetch": -1, "own_leo": -1, "diverged_from": -1, "seen_ms": -1, "windows": W.new_windows(),
            "truncations": 0, "truncated_records": 0, "status": None, "sig": None,
            # evidence for the cause (see _cause): the node's own last record and last metrics
            # (quorum time) and the metrics' spacing, the leader's last refusal of its fetches,
            # the spacing of its valid fetches (leader clock, smoothed, and its recent longest), a
            # past lag to measure the trend against, its campaigns
            "own_ms": -1, "periodic_ms": -1, "own_gap_ms": -1, "rejected": None, "gap_ms": -1, "gap_peak_ms": -1,
            "lag_ref": None, "campaigns": 0, "campaign_epoch": -1,
            # when its own records last resumed after a silence, and how long that silence was
            "back_ms": -1, "silent_ms": -1,
            # quorum time the collector last found its metrics endpoint refusing connections
            "refused_ms": -1}


class QuorumTracker:
    def __init__(self, cfg: HealthConfig, state: dict[str, Any], run_id: int | None = None):
        """`run_id` identifies the job run: with one, a replica's row is emitted only when what it
        shows changed (and in full once per run, for the run's fresh view of every quorum); with
        None, every evaluation emits every row."""
        self.cfg = cfg
        self.s = state
        self.run_id = run_id
        self.events: list[dict[str, Any]] = []  # event rows to emit with the next snapshot
        self.window = cfg.unreachable_after_ms  # sources heard within this long move the clock
        self._late = 0  # how late the record being folded in came (clocks.observe)

    # --- input ------------------------------------------------------------------------------

    def apply_all(self, records: list[dict[str, Any]], reduce: bool = True) -> None:
        """Fold a batch of records in arrival order (Kafka offset when known: one quorum's
        records share one partition), evaluating at every tick of the quorum's clock on the
        way, so a backlog still sees every transition and every window. A tick is evaluated
        before the record that crossed it is folded in, so it is judged on what came before.
        Each replica's valid fetches are reduced per tick first (reduce.py); `reduce=False`
        folds every record (the reference the reduction is tested against)."""
        if records and all(r.get("_offset") is not None for r in records):
            ordered = sorted(records, key=lambda r: (r.get("_kafka_partition") or 0, r["_offset"]))
        else:
            ordered = sorted(records, key=lambda r: r["time_ms"])
        if reduce:
            ordered = R.reduce_fetches(ordered, self.cfg.tick_ms)
        for rec in ordered:
            observed = self._observe(rec)
            if observed is None:
                continue
            # a quorum never evaluated yet counts its ticks from its first record: a backlog read
            # in its first micro-batch (a job started from the earliest offsets) is judged too
            last_eval, now = self.s["last_eval_ms"], self.s["clock"]["now"]
            if last_eval < 0:
                last_eval = self.s["started_ms"]
            if last_eval >= 0 and now - last_eval >= self.cfg.tick_ms:
                tick = last_eval + self.cfg.tick_ms * ((now - last_eval) // self.cfg.tick_ms)
                self._evaluate(tick, self.s["last_input_proc_ms"], silent=False, emit_snapshot=False)
            self._fold(rec, *observed)

    def apply(self, rec: dict[str, Any]) -> None:
        observed = self._observe(rec)
        if observed is not None:
            self._fold(rec, *observed)

    def _observe(self, rec: dict[str, Any]) -> tuple[int | None, int] | None:
        """Move the quorum's clock with one record; returns (the stamp to trust, None for an
        outlier; its quorum time), or None for a record refused."""
        kind = rec["type"]
        if kind != "quorum_poll_error" and self._implausible(rec):
            return None
        if kind in ("fetch", "metrics", "state_change"):
            source = f"node-{rec['leader_id'] if kind == 'fetch' else rec['node_id']}"
        else:
            source = COLLECTOR
        stamp = int(rec["time_ms"])
        lead = f"node-{self.s['leader']}" if self.s["leader"] >= 0 else None
        t, ahead, late = C.observe(self.s["clock"], source, stamp, self.window, lead)
        self._late = late
        # Further ahead of every other clock than any delay explains: this one stamp is wrong.
        # Its content still counts, at the quorum's time, on its clock's own pace.
        return (None if ahead > self.window else stamp), t

    def _fold(self, rec: dict[str, Any], stamp: int | None, t: int) -> None:
        kind = rec["type"]
        s = self.s
        if s["started_ms"] < 0:
            s["started_ms"] = t
        s["last_event_ms"] = max(s["last_event_ms"], t)
        if kind in ("fetch", "metrics", "state_change"):
            s["nodes_heard_ms"] = max(s.get("nodes_heard_ms", -1), t)
        if kind == "fetch":
            self._apply_fetch(rec, stamp, t)
        elif kind == "metrics":
            self._apply_metrics(rec, stamp, t)
        elif kind == "state_change":
            self._apply_state_change(rec, t)
        elif kind == "quorum_snapshot":
            self._apply_snapshot(rec, t)
        elif kind == "quorum_poll_error":
            self._apply_poll_error(rec, t)

    def _implausible(self, rec: dict[str, Any]) -> bool:
        """An epoch further ahead than elections could have carried the quorum since its
        current epoch began (at most one bump per election timeout, doubled, plus a margin)."""
        epoch = int(rec["epoch"] if rec["type"] in ("metrics", "state_change") else rec["leader_epoch"])
        s = self.s
        if s["epoch"] < 0:
            return False
        elapsed = max(0, s["clock"]["now"] - s["epoch_first_ms"])
        bound = s["epoch"] + self.cfg.max_epoch_jump + 2 * elapsed // self.cfg.election_timeout_ms
        if epoch <= bound:
            return False
        node = rec.get("node_id", rec.get("leader_id"))
        self._event("rejected", replica_id=None, status="implausible_epoch", now_ms=s["clock"]["now"],
                    reason=f"{rec['type']} from node {node} claims epoch {epoch}, current {s['epoch']} "
                           f"(at most {bound} reachable since)")
        return True

    def _apply_fetch(self, rec: dict[str, Any], stamp: int, t: int) -> None:
        epoch, leader, rid = int(rec["leader_epoch"]), int(rec["leader_id"]), int(rec["replica_id"])
        if rec["outcome"] == "not_leader":
            return  # the emitter answered as a non-leader: no claim, no KIP-836 update
        publishers = self.s.setdefault("fetch_publishers", [])
        if leader not in publishers:
            publishers.append(leader)
        self._claim(leader, epoch, t)
        if rec["outcome"] == "valid" and rid != leader and rec["replica_role"] == "voter":
            self._support(leader, epoch, rid, t)
        self._settle_epoch(epoch, t)
        if epoch != self.s["epoch"] or leader != self.s["leader"]:
            return  # a zombie's or a rival's view must not overwrite the current leader's
        trusted = stamp is not None
        stamp = self._leader_clock(leader, epoch, stamp, t, via="node")
        self._leader_alive(t, 0)
        self._leader_progress(int(rec["leader_log_end_offset"]), int(rec["high_watermark"]), t)
        r = self._replica(rid, rec["replica_role"])
        r["seen_ms"] = max(r["seen_ms"], t)
        if rec["outcome"] == "diverging":
            # the leader told it to cut its log back; its next valid fetch says to where
            r["diverged_from"] = max(r["diverged_from"], int(rec["fetch_offset"]))
        if rec["outcome"] in REFUSALS:
            count = r["rejected"][2] + 1 if r["rejected"] is not None else 1
            r["rejected"] = [rec["outcome"], stamp, count]
        if rec["outcome"] != "valid":
            return
        # a record standing for fetches dropped before it (reduce.py) carries their gaps' measures
        stands_for = rec.get(R.FETCHES) or 1
        if stands_for > 1:
            r["gap_peak_ms"], r["gap_ms"] = R.fold_gaps(r.get("gap_peak_ms", -1), r["gap_ms"], rec)
        elif r["last_fetch"] >= 0 and stamp > r["last_fetch"]:
            gap = stamp - r["last_fetch"]
            r["gap_ms"] = gap if r["gap_ms"] < 0 else (2 * r["gap_ms"] + gap) // 3
            # the longest recent gap, fading by a quarter a fetch (see _cause)
            r["gap_peak_ms"] = R.peak_step(r.get("gap_peak_ms", -1), gap)
        r["rejected"], r["campaigns"], r["campaign_epoch"] = None, 0, -1
        fetch_offset, leader_leo = int(rec["fetch_offset"]), int(rec["leader_log_end_offset"])
        self._truncation_after_divergence(rid, r, fetch_offset, t)
        # KIP-836, in the leader's order (facts file), on the leader's own clock: caught up if the
        # fetch reached the leader's end, or reached what the end was at the previous fetch. Not
        # across dropped fetches: the previous one is not the one before this.
        if fetch_offset >= leader_leo:
            r["last_caught_up"] = max(r["last_caught_up"], stamp)
        elif stands_for == 1 and r["fetch_leader_leo"] > 0 and fetch_offset >= r["fetch_leader_leo"]:
            r["last_caught_up"] = max(r["last_caught_up"], r["last_fetch"])
        # The leader's own result, when the record carries it: in Kafka order the same as the
        # replay above, and still right when records before this one were lost or came before
        # the job started. Not from an outlier stamp: its clock is out of line with the view's.
        carried = rec.get("last_caught_up_timestamp_ms")
        if trusted and carried is not None and carried >= 0:
            r["last_caught_up"] = max(r["last_caught_up"], min(int(carried), stamp))
        r["fetch_leader_leo"] = leader_leo
        r["last_fetch"] = max(r["last_fetch"], stamp)
        if r["first_fetch"] < 0:
            r["first_fetch"] = stamp
        r["leo"] = fetch_offset

    def _apply_metrics(self, rec: dict[str, Any], stamp: int, t: int) -> None:
        node, epoch, leader = int(rec["node_id"]), int(rec["epoch"]), int(rec["leader_id"])
        state, hw = rec["state"], int(rec["high_watermark"])
        voter_set = rec.get("voter_set")
        voter_set = [int(v) for v in voter_set] if voter_set is not None else []  # pandas gives arrays
        self._report(node, epoch, state, leader, t, hw)
        role = "observer" if state == "observer" else "voter"
        if voter_set:
            role = "voter" if node in {int(v) for v in voter_set} else "observer"
        r = self._replica(node, role)
        r["seen_ms"] = max(r["seen_ms"], t)
        self._own_record(r, state, epoch, t, periodic=True)
        self._own_log_end(node, r, int(rec["log_end_offset"]), t)
        if state == "leader":
            self._claim(node, epoch, t)
        elif leader >= 0 and role == "voter" and state in ("follower", "voted", "unattached"):
            self._support(leader, epoch, node, t)
        self._settle_epoch(epoch, t)
        s = self.s
        if voter_set and (state == "leader" and epoch == s["epoch"] or s["voter_set"] is None):
            self._set_voters(sorted({int(v) for v in voter_set}), t, f"node {node}'s metrics")
        if epoch != s["epoch"]:
            return
        if state == "leader" and node == s["leader"]:
            if node in s.get("fetch_publishers", ()):
                # its fetches come on the same stream, in order: its now is its view's now
                self._leader_clock(node, epoch, stamp, t, via="node")
                self._leader_alive(t, 0)
            else:
                # A node that publishes no fetches (a Kafka node read through its metrics endpoint):
                # alive and committing, but its replicas' fetches are known only as of the last
                # DescribeQuorum snapshot, so its view does not move on.
                self._leader_alive(t, self._poll_allowance())
            self._leader_progress(int(rec["log_end_offset"]), hw, t)
            r["leo"] = int(rec["log_end_offset"])
        elif leader >= 0 and leader == s["leader"] and self._hw_advanced_by(node, hw):
            # A follower naming the leader whose high watermark moved: the leader commits, so it
            # is alive, even if its own records do not reach us (its publisher is down).
            self._leader_alive(t, self._poll_allowance() if leader not in s.get("fetch_publishers", ()) else 0)
            self._leader_progress(-1, hw, t)

    def _apply_state_change(self, rec: dict[str, Any], t: int) -> None:
        node, epoch, leader = int(rec["node_id"]), int(rec["epoch"]), int(rec["leader_id"])
        self._report(node, epoch, rec["to_state"], leader, t, None)
        r = self.s["replicas"].get(str(node))
        if r is not None:
            self._own_record(r, rec["to_state"], epoch, t, periodic=False,
                             entering=rec["from_state"] not in CAMPAIGNING)
        if rec["to_state"] == "leader":
            self._claim(node, epoch, t)
        else:
            # A node that steps down stops claiming at once (no need to wait for its claim to age).
            for claims in self.s["claims"].values():
                claims.pop(str(node), None)
            if leader >= 0 and leader != node and rec["to_state"] in ("follower", "voted", "unattached"):
                self._support(leader, epoch, node, t)
        self._settle_epoch(epoch, t)

    def _apply_snapshot(self, rec: dict[str, Any], t: int) -> None:
        """DescribeQuorum as answered by the leader: its row's last fetch time is its clock's now."""
        s = self.s
        epoch, leader = int(rec["leader_epoch"]), int(rec["leader_id"])
        interval = int(rec.get("poll_interval_ms") or -1)
        voters = [] if rec.get("voters") is None else list(rec["voters"])  # pandas gives arrays
        observers = [] if rec.get("observers") is None else list(rec["observers"])
        s["poll"] = {"interval": interval, "ok_ms": t, "failures": 0, "error": None, "blind": False,
                     "answered_by": int(rec.get("answered_by") or -1)}
        self._refused(rec, t)
        leader_row = next((v for v in voters if int(v["replica_id"]) == leader), None)
        leader_now = int(leader_row["last_fetch_timestamp_ms"]) if leader_row is not None else -1
        if leader_now < 0:
            leader_now = max([int(v["last_fetch_timestamp_ms"]) for v in voters + observers] + [-1])
        if leader >= 0:
            self._report(leader, epoch, "leader", leader, t, int(rec["high_watermark"]))
            self._claim(leader, epoch, t)
            for v in voters:
                rid, fetched = int(v["replica_id"]), int(v["last_fetch_timestamp_ms"])
                if rid != leader and fetched >= 0 and leader_now - fetched <= self.cfg.unreachable_after_ms:
                    self._support(leader, epoch, rid, t)
                    self._report(rid, epoch, "follower", leader, t, None)
        self._set_voters(sorted(int(v["replica_id"]) for v in voters), t, "a DescribeQuorum snapshot")
        self._settle_epoch(epoch, t)
        if leader < 0 or epoch != s["epoch"] or leader != s["leader"] or leader_now < 0:
            return
        allowance = max(interval, 0)
        stamp = self._leader_clock(leader, epoch, leader_now, t, via="poll")
        self._leader_alive(t, allowance)
        for role, group in (("voter", voters), ("observer", observers)):
            for v in group:
                rid = int(v["replica_id"])
                r = self._replica(rid, role)
                self._same_directory(rid, r, v.get("directory_id"), t)
                r["role"] = role
                leo = int(v["log_end_offset"])
                if leo >= 0:
                    self._own_log_end(rid, r, leo, t)
                    r["leo"] = leo
                    if rid == leader:
                        self._leader_progress(leo, int(rec["high_watermark"]), t)
                fetched = int(v["last_fetch_timestamp_ms"])
                if fetched >= 0:
                    # the leader's stamps, capped at its now (the leader's clock caps itself)
                    r["last_fetch"] = max(r["last_fetch"], min(fetched, stamp))
                    if r["first_fetch"] < 0:
                        r["first_fetch"] = r["last_fetch"]
                    r["seen_ms"] = max(r["seen_ms"], t - (stamp - r["last_fetch"]))
                caught = int(v["last_caught_up_timestamp_ms"])
                if caught >= 0:
                    r["last_caught_up"] = max(r["last_caught_up"], min(caught, stamp))

    def _apply_poll_error(self, rec: dict[str, Any], t: int) -> None:
        """A DescribeQuorum that failed. An error answer (NOT_LEADER_OR_FOLLOWER: no leader) or
        refused connections (nothing listens) are evidence about the quorum; a poll that got no
        answer at all (timeout, an unknown host, a connection that broke) is evidence about the
        collector's path to it, and says nothing of the voters."""
        poll = self.s["poll"] or {"interval": -1, "ok_ms": -1, "failures": 0, "error": None, "answered_by": -1}
        code = int(rec.get("error_code") if rec.get("error_code") is not None else -1)
        error = str(rec.get("error") or code)
        blind = error in kafka_failures.COLLECTOR_SIDE or (code < 0 and error not in EVIDENT_POLL_ERRORS)
        poll.update({"interval": int(rec.get("poll_interval_ms") or -1), "failures": poll["failures"] + 1,
                     "error": error, "blind": blind,
                     "answered_by": int(rec.get("answered_by") if rec.get("answered_by") is not None else -1)})
        self.s["poll"] = poll
        self._refused(rec, t)
        if not blind:
            # No leader answered at t: the allowance for the gap between polls is spent.
            self.s["leader_alive_allowance_ms"] = 0

    def _refused(self, rec: dict[str, Any], t: int) -> None:
        """The nodes whose metrics endpoint refused the collector's connection: gone."""
        for node in rec.get("refused_nodes") or ():
            r = self.s["replicas"].get(str(int(node)))
            if r is not None:
                r["refused_ms"] = max(r.get("refused_ms", -1), t)

    def _poll_allowance(self) -> int:
        """The gap between two polls: how long a snapshot's view stays the latest there is."""
        poll = self.s["poll"]
        return max(poll["interval"], 0) if poll is not None else 0

    def _gone(self, r: dict[str, Any], now_ms: int) -> bool:
        """Its metrics endpoint, which answered before, refuses connections since its last own
        record, lately: its process is gone (a node that hangs still accepts them)."""
        refused = r.get("refused_ms", -1)
        return 0 <= r["own_ms"] < refused and now_ms - refused <= self.cfg.unreachable_after_ms

    # --- evidence about leaders and epochs -------------------------------------------------------

    def _report(self, node: int, epoch: int, state: str, leader: int, t: int, hw: int | None) -> None:
        prev = self.s["reports"].get(str(node))
        if hw is None and prev is not None:
            hw = prev[4]
        self.s["reports"][str(node)] = [epoch, state, leader, t, -1 if hw is None else hw,
                                        prev[4] if prev is not None else -1]

    def _own_record(self, r: dict[str, Any], state: str, epoch: int, t: int, periodic: bool,
                    entering: bool = False) -> None:
        """A record the node wrote itself: it was alive when it wrote it (a record that came late
        says so of its own moment, not of now); campaigning counts an election attempt: a new
        epoch, or a state change into campaigning (a pre-vote round keeps the epoch). Only
        its periodic records (metrics) set the pace they are expected at: the state changes of
        a campaign come in bursts between them and would make a slightly late one look fatal."""
        t -= self._late
        if 0 <= r["own_ms"] < t and t - r["own_ms"] > self._alive_within(r):
            r["back_ms"], r["silent_ms"] = t, t - r["own_ms"]  # its records resume after a silence
        last = r.get("periodic_ms", -1)
        if periodic and last >= 0 and t > last:
            gap = t - last
            r["own_gap_ms"] = gap if r["own_gap_ms"] < 0 else (2 * r["own_gap_ms"] + gap) // 3
        if periodic:
            r["periodic_ms"] = max(last, t)
        r["own_ms"] = max(r["own_ms"], t)
        if state in CAMPAIGNING and (epoch > r["campaign_epoch"] or entering):
            r["campaigns"] += 1
            r["campaign_epoch"] = epoch

    def _alive_within(self, r: dict[str, Any]) -> int:
        """How old its last own record may be for the node to count alive: its records' pace
        (two of its usual gaps, at most the fetch timeout) and a margin. Past it, gone; within
        it, a node that just stopped is not yet told apart."""
        cap = self.cfg.unreachable_after_ms
        pace = min(2 * r["own_gap_ms"], cap) if r["own_gap_ms"] > 0 else cap
        return pace + self.window // 8

    def _hw_advanced_by(self, node: int, hw: int) -> bool:
        report = self.s["reports"].get(str(node))
        return report is not None and 0 <= report[5] < hw

    def _claim(self, node: int, epoch: int, t: int) -> None:
        claims = self.s["claims"].setdefault(str(epoch), {})
        claims[str(node)] = max(claims.get(str(node), -1), t)

    def _support(self, leader: int, epoch: int, voter: int, t: int) -> None:
        by_leader = self.s["support"].setdefault(str(epoch), {}).setdefault(str(leader), {})
        by_leader[str(voter)] = max(by_leader.get(str(voter), -1), t)

    def _confirmed_leader(self, epoch: int) -> int:
        """The node whose claim of `epoch` another voter backs (or the only voter), else -1."""
        voters = self.s["voter_set"]
        for node in sorted(self.s["claims"].get(str(epoch), {}), key=int):
            backers = set(self.s["support"].get(str(epoch), {}).get(node, {})) - {node}
            if voters is not None:
                backers &= {str(v) for v in voters}
            if backers or voters == [int(node)]:
                return int(node)
        return -1

    def _majority_epoch(self) -> int:
        """The highest epoch a majority of the voters has reached, by their latest reports."""
        voters = self.s["voter_set"]
        if not voters:
            return -1
        epochs = sorted((self.s["reports"][str(v)][0] for v in voters if str(v) in self.s["reports"]), reverse=True)
        need = len(voters) // 2 + 1
        return epochs[need - 1] if len(epochs) >= need else -1

    def _settle_epoch(self, epoch: int, t: int) -> None:
        """Adopt `epoch` (or the majority's) when the evidence confirms it; notice a new
        incarnation; learn the current epoch's leader once its claim is confirmed."""
        s = self.s
        self._new_incarnation(t)
        majority = self._majority_epoch()
        for candidate in sorted({epoch, majority}, reverse=True):
            if candidate <= s["epoch"]:
                break
            leader = self._confirmed_leader(candidate)
            if leader >= 0 or candidate <= majority:
                self._adopt(candidate, t)
                break
        if s["leader"] < 0 and s["epoch"] >= 0:
            leader = self._confirmed_leader(s["epoch"])
            if leader >= 0:
                self._new_leader(leader, t)

    def _adopt(self, epoch: int, t: int) -> None:
        s = self.s
        if s["epoch"] >= 0:
            s["elections"] += epoch - s["epoch"]
            s["epoch_changes"] = (s["epoch_changes"] + [t])[-MAX_TIMES_KEPT:]
        if s["leader"] >= 0:
            s["previous_leader"] = s["leader"]
        s["epoch"], s["epoch_first_ms"], s["leader"] = epoch, t, -1
        for e in [e for e in s["claims"] if int(e) < epoch - EPOCHS_KEPT]:
            del s["claims"][e]
        for e in [e for e in s["support"] if int(e) < epoch]:
            del s["support"][e]

    def _new_leader(self, leader: int, t: int) -> None:
        """The current epoch's leader is known. Counted as a leader change unless it is the first
        leader this monitor sees (a failover with split votes is one change, whatever the epochs)."""
        s = self.s
        if s["view"] is not None:
            s["leader_changes"] += 1
            s["leader_change_times"] = (s["leader_change_times"] + [t])[-MAX_TIMES_KEPT:]
        s["leader"], s["leader_leo"] = leader, -1

    def _new_incarnation(self, t: int) -> None:
        """Honest nodes never go back in epoch: a majority of voters reporting a lower epoch than
        the current one, after it began, while its leader is no longer heard, is the cluster
        formatted anew under the same id."""
        s = self.s
        voters = s["voter_set"]
        if not voters or s["epoch"] < 0 or t - s["leader_alive_ms"] <= self.cfg.leader_claim_window_ms:
            return  # the current epoch's leader still heard: no new incarnation
        lower = [v for v in voters if str(v) in s["reports"]
                 and s["reports"][str(v)][0] < s["epoch"] and s["reports"][str(v)][3] >= s["epoch_first_ms"]]
        if len(lower) <= len(voters) // 2:
            return
        old_epoch, old_hw, incarnation = s["epoch"], s["hw"], s["incarnation"]
        keep = {k: s[k] for k in ("cluster_id", "topic", "partition", "seq", "event_seq", "clock", "started_ms",
                                  "last_event_ms", "last_input_proc_ms", "last_eval_ms", "timer_ms", "status",
                                  "voter_set", "reports", "poll")}
        fresh = new_state(s["cluster_id"], s["topic"], s["partition"])
        s.clear()
        s.update(fresh)
        s.update(keep)
        s["incarnation"] = incarnation + 1
        s["reports"] = {n: r for n, r in s["reports"].items() if r[0] < old_epoch}
        self._event("incarnation", replica_id=None, now_ms=t, status=None,
                    reason=f"voters {sorted(lower)} went back from epoch {old_epoch} (high watermark "
                           f"{old_hw}): a new incarnation of the cluster")

    def _leader_clock(self, leader: int, epoch: int, stamp: int | None, t: int, via: str) -> int:
        """Advance the current leader's view with one of its stamps; return the stamp to use (an
        outlier stamp, None, stands in as the view's clock moved on by the quorum time elapsed).
        `offset` maps the leader's stamps to quorum time: its source's offset in the clock for
        its own records, the snapshot's (leader now - collector time) for a poll."""
        s = self.s
        view = s["view"]
        if view is None or view["node"] != leader or view["epoch"] != epoch:
            previous = self._view_with_q(view)
            if stamp is None:
                # the quorum time `t` in the leader's clock, where the view's stamps live: its
                # source's offset as _view_q maps them back (a view started on `t` itself stood
                # still for as long as that offset, the frozen old leader `stalled` meanwhile)
                entry = s["clock"]["sources"].get(f"node-{leader}") if via == "node" else None
                stamp = t + (entry[0] if entry is not None else 0)
            view = s["view"] = {"node": leader, "epoch": epoch, "stamp": stamp, "since": stamp, "via": via,
                                "offset": stamp - t}
            self._rebase_replicas(previous, self._view_with_q(view))
            return stamp
        if stamp is None:
            stamp = view["stamp"] + max(0, t - self._view_q(view))
        view["stamp"] = max(view["stamp"], stamp)
        view["via"] = via
        view["offset"] = view["stamp"] - t if via == "poll" else view["offset"]
        return stamp

    def _view_q(self, view: dict[str, Any]) -> int:
        """Quorum time of the leader view's latest stamp (its clock's now)."""
        offset = view["offset"]
        if view["via"] == "node":
            entry = self.s["clock"]["sources"].get(f"node-{view['node']}")
            offset = entry[0] if entry is not None else offset
        return min(view["stamp"] - offset, self.s["clock"]["now"])

    def _view_with_q(self, view: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if view is None else {**view, "q": self._view_q(view)}

    def _rebase_replicas(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Carry each replica's leader-clock times over to the new leader's clock (through the
        quorum's clock), so a replica stalled before a failover is still stalled after it; the
        KIP-836 offsets start afresh, as the new leader's do. A replica caught up when the old
        view last spoke is caught up as the new one begins: the election between them gave it no
        leader to keep up with, and the new leader counts its caught-up time afresh."""
        for r in self.s["replicas"].values():
            r["fetch_leader_leo"] = -1
            caught_up = old is not None and r["last_caught_up"] >= 0 \
                and old["stamp"] - r["last_caught_up"] <= self.cfg.lagging_after_ms
            for key in ("last_fetch", "last_caught_up", "first_fetch"):
                if r[key] < 0 or old is None:
                    r[key] = -1
                    continue
                q = old["q"] - (old["stamp"] - r[key])
                r[key] = new["stamp"] - (new["q"] - q)
            if caught_up:
                r["last_caught_up"] = max(r["last_caught_up"], new["stamp"])

    def _leader_alive(self, t: int, allowance_ms: int) -> None:
        s = self.s
        if t >= s["leader_alive_ms"]:
            s["leader_alive_ms"], s["leader_alive_allowance_ms"] = t, allowance_ms

    def _leader_progress(self, leader_leo: int, hw: int, t: int) -> None:
        s = self.s
        if leader_leo >= 0:
            s["leader_leo"] = leader_leo
        if hw > s["hw"]:
            s["hw"], s["hw_advanced_ms"] = hw, t

    def _set_voters(self, voters: list[int], t: int, source: str) -> None:
        s = self.s
        if not voters or voters == s["voter_set"]:
            return
        if s["voter_set"] is not None:
            s["voter_set_changes"] += 1
            self._event("voter_set", replica_id=None, now_ms=t, status=None,
                        reason=f"voters {s['voter_set']} -> {voters} (from {source})")
        s["voter_set"] = voters

    # --- per-replica helpers ---------------------------------------------------------------------

    def _replica(self, rid: int, role: str) -> dict[str, Any]:
        reps = self.s["replicas"]
        r = reps.get(str(rid))
        if r is None:
            r = reps[str(rid)] = _new_replica(role)
        elif self.s["voter_set"] is None:
            r["role"] = role
        return r

    def _same_directory(self, rid: int, r: dict[str, Any], directory: str | None, t: int) -> None:
        """A replica is (id, directory id): a new directory under the same id is a replaced disk."""
        if not directory or directory == ZERO_DIRECTORY_ID:
            return
        if r["dir"] is not None and r["dir"] != directory:
            self._event("replaced", replica_id=rid, now_ms=t, status=None,
                        reason=f"directory {r['dir']} -> {directory}: a new replica under id {rid}")
            fresh = _new_replica(r["role"])
            fresh["status"], fresh["windows"] = r["status"], r["windows"]
            r.clear()
            r.update(fresh)
        r["dir"] = directory

    def _own_log_end(self, rid: int, r: dict[str, Any], leo: int, t: int) -> None:
        """A node's own log end offset going backwards is a truncation of its uncommitted tail."""
        if 0 <= leo < r["own_leo"]:
            self._truncated(rid, r, r["own_leo"], leo, t)
        r["own_leo"] = leo

    def _truncation_after_divergence(self, rid: int, r: dict[str, Any], fetch_offset: int, t: int) -> None:
        """A valid fetch below the offset of the replica's diverging fetch: it truncated. A node
        usually truncates and catches up between two of its metrics records, so its own log end
        rarely shows going backwards; the leader's fetch records always do. Counted once: a
        decrease its metrics already showed is not counted again."""
        diverged, r["diverged_from"] = r["diverged_from"], -1
        if 0 <= fetch_offset < diverged and (r["own_leo"] < 0 or r["own_leo"] > fetch_offset):
            self._truncated(rid, r, diverged, fetch_offset, t)
            r["own_leo"] = fetch_offset

    def _truncated(self, rid: int, r: dict[str, Any], from_leo: int, to_leo: int, t: int) -> None:
        lost = from_leo - to_leo
        r["truncations"] += 1
        r["truncated_records"] += lost
        self._event("truncation", replica_id=rid, role=r["role"], now_ms=t, records_lost=lost,
                    log_end_offset=to_leo, reason=f"log end offset {from_leo} -> {to_leo}")

    def _event(self, kind: str, **fields: Any) -> None:
        self.s["event_seq"] += 1
        self.events.append({"kind": kind, "event_seq": self.s["event_seq"], **fields})

    # --- evaluation ------------------------------------------------------------------------------

    def evaluate(self, proc_ms: int | None, silent: bool = False, emit_snapshot: bool = True,
                 wall_ms: int | None = None) -> list[dict[str, Any]]:
        """Re-derive every status now and return the rows to emit. `proc_ms` is the micro-batch's
        processing time (stamped on the rows); `wall_ms` (default `proc_ms`) the job's wall clock:
        with input, silence is counted from it; on a timer tick with no input (`silent`) the
        quorum's clock moves on by the wall-clock time since. None: event time only (tests)."""
        clock = self.s["clock"]
        wall_ms = proc_ms if wall_ms is None else wall_ms
        if wall_ms is not None:
            if silent:
                C.observe_processing(clock, wall_ms)
            else:
                C.anchor_processing(clock, wall_ms)
        return self._evaluate(clock["now"], proc_ms, silent, emit_snapshot)

    def _evaluate(self, now_ms: int, proc_ms: int | None, silent: bool, emit_snapshot: bool) -> list[dict[str, Any]]:
        cfg, s = self.cfg, self.s
        if now_ms < 0:
            return []
        if not silent:
            s["last_eval_ms"] = max(now_ms, s["last_eval_ms"])
        C.forget_silent(s["clock"], cfg.observer_forget_ms)
        epoch, leader = s["epoch"], s["leader"]
        current_claims = {int(n): ms for n, ms in s["claims"].get(str(epoch), {}).items()
                          if now_ms - ms <= cfg.leader_claim_window_ms}
        allowance = cfg.unreachable_after_ms + s["leader_alive_allowance_ms"]
        leader_row = s["replicas"].get(str(leader))
        leader_alive = leader >= 0 and now_ms - s["leader_alive_ms"] <= allowance \
            and not (leader_row is not None and self._gone(leader_row, now_ms))
        leader_gone_for = now_ms - max(s["leader_alive_ms"], s["started_ms"])
        zombies = {int(n) for e, claims in s["claims"].items() if int(e) < epoch
                   for n, ms in claims.items()
                   if ms > s["epoch_first_ms"] and now_ms - ms <= cfg.leader_claim_window_ms} - set(current_claims)
        candidate_epoch = max([r[0] for r in s["reports"].values() if r[1] in CAMPAIGNING and r[0] >= epoch]
                              + [int(e) for e in s["claims"] if int(e) > epoch] + [-1])

        voter_set = s["voter_set"]
        if voter_set is not None:
            for v in voter_set:
                self._replica(v, "voter")
            for rid, r in s["replicas"].items():
                r["role"] = "voter" if int(rid) in voter_set else "observer"

        view = self._view_with_q(s["view"]) if s["view"] is not None and s["view"]["node"] == leader else None
        view_age = now_ms - view["q"] if view is not None else None
        # A handover under way: the old leader gone, or the new one's view of its replicas not yet
        # arrived, for less than the fetch timeout. Followers fetch from a new leader within
        # milliseconds; an evaluation that falls in between judges nothing new about them.
        handover = (leader_gone_for <= cfg.unreachable_after_ms if not leader_alive
                    else view is None and now_ms - s["epoch_first_ms"] <= cfg.unreachable_after_ms)
        rows: list[dict[str, Any]] = []
        full = self.run_id is None or s.get("emitted_run") != self.run_id
        if emit_snapshot:
            s["emitted_run"] = self.run_id
        raw: dict[int, str] = {}
        causes: dict[int, str] = {}
        following: set[int] = set()
        for rid in sorted(s["replicas"], key=int):
            r = s["replicas"][rid]
            if r["role"] == "observer" and now_ms - r["seen_ms"] > cfg.observer_forget_ms:
                del s["replicas"][rid]
                self._event("forget", replica_id=int(rid), role="observer", now_ms=now_ms,
                            reason=f"observer silent for {cfg.observer_forget_ms} ms")
                continue
            cause = None
            if self._gone(r, now_ms):
                # positive evidence, whatever the leader's view says yet: not lagging first
                status, cause = S.UNREACHABLE, S.DOWN
                reason = (f"its metrics endpoint refuses connections ({now_ms - r['refused_ms']} ms ago); down: "
                          f"nothing from node {rid} for {now_ms - r['own_ms']} ms and nothing listens there")
            elif handover and r["status"] is not None and not (int(rid) == leader and leader_alive):
                # as for the quorum: a replica keeps its verdict, and why, through a handover's gap
                status, reason, cause = r["status"]["status"], r["status"]["reason"], r["status"].get("cause")
            else:
                status, reason = self._replica_candidate(int(rid), r, leader, leader_alive, view, view_age)
                if status != S.CAUGHT_UP:
                    cause, evidence = self._cause(int(rid), r, status, leader, view, now_ms)
                    reason = f"{reason}; {cause}: {evidence}"
            raw[int(rid)] = status
            if cause is not None:
                causes[int(rid)] = cause
            if status == S.UNKNOWN and leader_alive and self._follows(int(rid), leader, now_ms):
                following.add(int(rid))
            # The leader's own row is never held: it leads now, whatever it was a moment ago.
            self._settle(r, status, reason, now_ms, silent, "replica", int(rid), hold=int(rid) != leader,
                         cause=cause)
            closed = W.extend(r["windows"], now_ms, REPLICA_WINDOW_STATE.get(r["status"]["status"], W.LAGGING),
                              cfg.caught_up_horizon_ms)
            if closed is not None:
                self._event("window", replica_id=int(rid), role=r["role"], now_ms=now_ms, status=closed[2],
                            window_start_ms=closed[0], window_end_ms=closed[1])
            if emit_snapshot:
                row = self._replica_row(int(rid), r, now_ms, leader, view)
                if full or _shows_change(r["sig"], row):
                    r["sig"] = _signature(row)
                    rows.append(row)

        voter_ids = [int(rid) for rid, r in s["replicas"].items() if r["role"] == "voter"]
        n_voters = len(voter_set) if voter_set is not None else len(voter_ids)
        caught_up = sum(1 for v in voter_ids if raw.get(v) == S.CAUGHT_UP)
        reachable = sum(1 for v in voter_ids if raw.get(v) in REACHABLE or v in following)
        # A network partition: voters alive but not reaching the leader (who still fetches from
        # it is the leader's side); or the leader cut off from every other voter.
        leader_side = sorted({leader} | {v for v in voter_ids if raw.get(v) in REACHABLE}) if leader_alive else []
        cut_off = sorted(v for v in voter_ids if causes.get(v) == S.PARTITIONED)
        partition = ""
        if cut_off:
            side_has_majority = len(leader_side) > n_voters // 2
            previous = s.get("previous_leader", -1)
            if leader_alive and leader_side == [leader] and n_voters > 1:
                partition = (f"network partition: leader {leader} cut off from every voter ({cut_off} alive); "
                             f"its side has no majority")
            elif cut_off == [previous] and previous != leader and set(voter_ids) - {previous} <= set(leader_side):
                # The usual end of a leader cut off from everyone: the others elected a new one
                # before the job saw the old leader alone (check quorum resigns it soon after).
                partition = (f"network partition: previous leader {previous} cut off from every voter; "
                             f"leader {leader}'s side {leader_side} "
                             f"{'holds' if side_has_majority else 'has no'} majority")
            else:
                partition = (f"network partition: voters {cut_off} cut off from leader {leader}; its side "
                             f"{leader_side} {'holds' if side_has_majority else 'has no'} majority")
        behind = sorted(v for v in voter_ids if raw.get(v) in (S.LAGGING, S.STALLED, S.UNREACHABLE))
        majority = n_voters > 0 and reachable > n_voters // 2
        s["epoch_changes"] = [t for t in s["epoch_changes"] if now_ms - t <= cfg.storm_window_ms]
        s["leader_change_times"] = [t for t in s["leader_change_times"] if now_ms - t <= cfg.storm_window_ms]
        leader_changes = len(s["leader_change_times"])
        hw_since = s["hw_advanced_ms"] if s["hw_advanced_ms"] >= 0 else s["started_ms"]
        hw_age = now_ms - hw_since if hw_since >= 0 else None

        poll = s["poll"]
        polls_failing = poll is not None and poll["failures"] > 0
        # The collector reaches no node, and no node's own record arrives: nothing to judge by
        # (a poll error that is evidence, an error answer or refused connections, is judged below).
        heard = max(poll["ok_ms"] if poll is not None else -1, s.get("nodes_heard_ms", -1), s["started_ms"])
        unobserved = polls_failing and poll.get("blind", False) and now_ms - heard > cfg.unreachable_after_ms
        unknown_voters = [v for v in voter_ids if raw.get(v) == S.UNKNOWN and v not in following]
        fault_tolerance = None if unobserved or unknown_voters or not n_voters else reachable - (n_voters // 2 + 1)

        status, reason = None, ""
        if len(current_claims) >= 2:
            status, reason = S.SPLIT_BRAIN, f"nodes {sorted(current_claims)} claim epoch {epoch}"
        elif unobserved:
            refused = poll["error"] in kafka_failures.COLLECTOR_SIDE
            status, reason = S.UNOBSERVED, (
                f"the collector {'is refused' if refused else 'reaches no node'}: DescribeQuorum failing "
                f"({kafka_failures.explain(poll['error']) if refused else poll['error']}, {poll['failures']} polls "
                f"in a row), and no node's own record for {now_ms - heard} ms")
        elif not leader_alive:
            detail = f"; election in progress (epoch {candidate_epoch})" if candidate_epoch > epoch else ""
            if s["poll"] is not None and s["poll"]["failures"]:
                detail += f"; DescribeQuorum failing ({s['poll']['error']}, {s['poll']['failures']} polls in a row)"
            if leader_gone_for > cfg.unreachable_after_ms:
                status, reason = S.LEADERLESS, f"no leader heard for epoch {epoch} for {leader_gone_for} ms{detail}"
            elif s["status"] is not None:
                # A handover or an election under way: not leaderless until the fetch timeout.
                status, reason = s["status"]["status"], s["status"]["reason"]
        elif not majority:
            status, reason = S.NO_MAJORITY, partition or f"{reachable} of {n_voters} voters reachable"
        elif hw_age is None or hw_age > cfg.hw_stall_after_ms + s["leader_alive_allowance_ms"]:
            status, reason = S.STALLED_QUORUM, f"high watermark {s['hw']} not advanced for {hw_age} ms"
        elif behind:
            status, reason = S.DEGRADED, partition or f"voters {behind} not caught up"
        elif zombies:
            status, reason = S.DEGRADED, f"zombie leaders {sorted(zombies)}"
        elif leader_changes >= cfg.storm_leader_changes:
            status, reason = S.DEGRADED, f"{leader_changes} leader changes within {cfg.storm_window_ms} ms"
        else:
            status, reason = S.HEALTHY, "all voters caught up"
            if polls_failing:
                reason = (f"judged by the nodes' own views: DescribeQuorum failing ({poll['error']}, "
                          f"{poll['failures']} polls in a row)")
            elif view_age is None or view_age > cfg.unreachable_after_ms:
                reason = f"leader {leader} heard through its followers (its own records do not arrive)"
        if status is not None:
            holder = {"status": s["status"]}
            # A partition named while the status stays (degraded before, degraded now) is news to
            # an operator: the quorum's cause, so that its change is an event of its own.
            cause = NETWORK_PARTITION if partition and reason == partition else None
            self._settle(holder, status, reason, now_ms, silent, "quorum", None, hold=True, cause=cause)
            s["status"] = holder["status"]

        if emit_snapshot and s["status"] is not None:
            s["seq"] += 1
            rows.append({
                "kind": "quorum", "now_ms": now_ms, "status": s["status"]["status"], "reason": s["status"]["reason"],
                "leader_id": leader if leader_alive else -1, "leader_epoch": epoch, "high_watermark": s["hw"],
                "hw_age_ms": hw_age, "leader_log_end_offset": s["leader_leo"], "voters": n_voters,
                "voters_caught_up": caught_up, "voters_reachable": reachable, "majority_reachable": majority,
                "fault_tolerance": fault_tolerance, "poll_error": poll["error"] if polls_failing else None,
                "poll_failures": poll["failures"] if poll is not None else None,
                "elections_total": s["elections"], "epoch_changes_window": len(s["epoch_changes"]),
                "leader_changes_total": s["leader_changes"], "leader_changes_window": leader_changes,
                "candidate_epoch": candidate_epoch, "incarnation": s["incarnation"],
                "voter_ids": ",".join(map(str, voter_set or [])), "voter_set_changes_total": s["voter_set_changes"],
                "leaders_claimed": len(current_claims), "zombie_leaders": len(zombies),
                "network_partition": bool(cut_off), "leader_side_voters": ",".join(map(str, leader_side)),
                "cut_off_voters": ",".join(map(str, cut_off))})
        out = self.events + rows if emit_snapshot else []
        if emit_snapshot:
            self.events = []
        for row in out:
            row.update({"cluster_id": s["cluster_id"], "topic": s["topic"], "partition": s["partition"],
                        "seq": s["seq"], "proc_ms": proc_ms, "last_input_proc_ms": s["last_input_proc_ms"],
                        "silent": silent})
        return out

    def _follows(self, rid: int, leader: int, now_ms: int) -> bool:
        """The replica's own latest report (or the last poll) names the live leader, recently."""
        report = self.s["reports"].get(str(rid))
        return report is not None and report[2] == leader and report[0] == self.s["epoch"] \
            and now_ms - report[3] <= self.cfg.unreachable_after_ms + self.s["leader_alive_allowance_ms"]

    def _replica_candidate(self, rid: int, r: dict[str, Any], leader: int, leader_alive: bool,
                           view: dict[str, Any] | None, view_age: int | None) -> tuple[str, str]:
        cfg, s = self.cfg, self.s
        if rid == leader and leader_alive:
            return S.CAUGHT_UP, "leader"
        if not leader_alive:
            return S.UNKNOWN, "no live leader to judge against"
        if view is None or view_age > cfg.unreachable_after_ms + s["leader_alive_allowance_ms"]:
            return S.UNKNOWN, f"the leader's view of its replicas has not arrived for {view_age} ms"
        poll = s["poll"]
        if view["via"] == "poll" and poll is not None and poll["interval"] > 0 \
                and 2 * poll["interval"] > cfg.unreachable_after_ms:
            return S.UNKNOWN, (f"polled every {poll['interval']} ms: too slow to vouch for it within "
                               f"{cfg.unreachable_after_ms} ms (poll every {cfg.unreachable_after_ms // 2} ms or less)")
        now = view["stamp"]  # the leader's clock
        silent_since = max(r["last_fetch"], view["since"])
        if now - silent_since > cfg.unreachable_after_ms:
            return S.UNREACHABLE, f"no valid fetch for {now - silent_since} ms"
        if r["last_fetch"] < 0:
            return S.UNKNOWN, "no valid fetch seen yet"
        lcu = r["last_caught_up"]
        if lcu >= 0 and now - lcu <= cfg.lagging_after_ms:
            return S.CAUGHT_UP, "caught up"
        behind_since = lcu if lcu >= 0 else r["first_fetch"]
        if now - behind_since > cfg.stall_after_ms:
            return S.STALLED, f"fetching but not caught up for {now - behind_since} ms"
        return S.LAGGING, f"not caught up for {now - behind_since} ms"

    def _cause(self, rid: int, r: dict[str, Any], status: str, leader: int, view: dict[str, Any] | None,
               now_ms: int) -> tuple[str, str]:
        """Why a replica is not caught up, from the evidence, with the evidence: `rejected` (the
        leader refuses its fetches), `slow` (fetches seconds apart), `behind` (fetching often,
        never at the leader's end), `partitioned` (alive by its own records, its fetches not
        reaching the leader), `down` (nothing from it at all), `unknown` (the evidence does not
        decide: watched from outside, no live leader, a node that publishes nothing itself)."""
        cfg, s = self.cfg, self.s
        own_age = now_ms - r["own_ms"] if r["own_ms"] >= 0 else None
        alive = own_age is not None and own_age <= self._alive_within(r)
        if status == S.UNKNOWN:
            if own_age is not None and not alive:
                return S.DOWN, f"nothing from node {rid} for {own_age} ms"
            return S.UNDECIDED, "no live leader's view to judge its fetches by" if view is None else "no evidence yet"
        now = view["stamp"]
        rejected = r["rejected"]
        if rejected is not None and now - rejected[1] <= cfg.unreachable_after_ms:
            return S.REJECTED, (f"the leader refuses its fetches: {rejected[0]} ({rejected[2]} in a row, the last "
                                f"{now - rejected[1]} ms ago)")
        # Seconds apart on average, or lately: a slowed node's fetches come in pairs (seconds,
        # then milliseconds apart), whose mean sits about the threshold.
        peak = max(r["gap_ms"], r.get("gap_peak_ms", -1))
        slow = peak > cfg.slow_fetch_gap_ms
        apart = f"valid fetches {r['gap_ms']} ms apart on average, {peak} ms at the longest lately"
        if status in (S.LAGGING, S.STALLED):
            if slow:
                return S.SLOW, apart
            return S.BEHIND, self._trend(r, now)
        if view["via"] == "poll" and r["own_ms"] < 0:
            return S.UNDECIDED, ("watched through DescribeQuorum only: a partition, a crash and a refused fetch "
                                 "look alike from outside")
        report = s["reports"].get(str(rid))
        silent_for = now - max(r["last_fetch"], view["since"])
        if alive and report is not None:
            follows = report[2] == leader and report[0] == s["epoch"]
            # Slow only while its fetches still come at their slow pace (a silence within twice
            # its recent longest gap), whatever its campaigns: its own fetch timeout runs out
            # between slow fetches too. A node cut off keeps the gaps it had (no fetch arrives
            # to change them), however long the silence.
            if slow and follows and silent_for <= 2 * peak:
                return S.SLOW, f"{apart}, the last {silent_for} ms ago"
            back_for = now_ms - r.get("back_ms", -1)
            if back_for < cfg.unreachable_after_ms:
                # Back from a silence (a frozen process resumed): what it reports is what it
                # knew before, and its first fetch is still on its way. A node cut off keeps
                # publishing, and is told apart a fetch timeout later.
                return S.UNDECIDED, (f"node {rid} is back {back_for} ms after {r['silent_ms']} ms without a record, "
                                     f"and has not fetched from leader {leader} yet")
            if report[1] in CAMPAIGNING:
                what = f"campaigning in epoch {report[0]} ({r['campaigns']} election attempts)"
            elif report[1] == "leader":
                what = f"still acting as leader of epoch {report[0]}"
            elif report[2] < 0:
                what = f"follows no leader (epoch {report[0]})"
            elif not follows:
                what = f"follows node {report[2]} in epoch {report[0]}"
            elif r["campaigns"] > 0:
                # A prospective node whose pre-vote fails goes back to the leader it knew, then
                # times out again: between attempts it reports following, its fetches still lost.
                what = (f"between election attempts ({r['campaigns']} since its last valid fetch) follows "
                        f"leader {leader} again, its fetches not arriving for {silent_for} ms")
            else:
                # Still following: its own fetch timeout has not run out. A one-way partition or
                # a stall: not yet told apart.
                return S.UNDECIDED, (f"node {rid} is alive and follows leader {leader}, but no fetch of it "
                                     f"arrived for {silent_for} ms")
            return S.PARTITIONED, f"node {rid} is alive (its own record {own_age} ms ago) and {what}"
        if own_age is None:
            return S.UNDECIDED, f"node {rid} publishes no records of its own: a partition and a crash look alike"
        return S.DOWN, f"nothing from node {rid} for {own_age} ms: its records stopped with its fetches"

    def _trend(self, r: dict[str, Any], now: int) -> str:
        """How far behind, and whether the gap grows or shrinks (and when it would close)."""
        lag = max(0, self.s["leader_leo"] - r["leo"]) if self.s["leader_leo"] >= 0 and r["leo"] >= 0 else None
        if lag is None:
            return "fetching, not at the leader's end"
        ref = r["lag_ref"]
        if ref is None or now - ref[2] > 2 * SAMPLE_TREND_MS or now < ref[2]:
            ref = r["lag_ref"] = [now, lag, now, lag]
        elif now - ref[2] >= SAMPLE_TREND_MS:
            ref[0], ref[1], ref[2], ref[3] = ref[2], ref[3], now, lag
        text = f"{lag} records behind the leader"
        if now - ref[0] >= 2000:
            rate = (lag - ref[1]) * 1000 / (now - ref[0])
            if rate >= 0.5:
                text += f", the gap growing {rate:.0f} records/s"
            elif rate <= -0.5:
                text += f", the gap closing {-rate:.0f} records/s: caught up in about {lag / -rate:.0f} s at that rate"
            else:
                text += ", the gap steady"
        return text

    def _settle(self, holder: dict[str, Any], candidate: str, reason: str, now_ms: int, silent: bool,
                kind: str, rid: int | None, hold: bool, cause: str | None = None) -> None:
        """Apply hysteresis: worse statuses apply at once, better ones after recovery_hold_ms.
        A status entered while the quorum was silent is no evidence, so it clears at once."""
        cur = holder["status"]
        if cur is None or (cur.get("initial") and candidate in (S.CAUGHT_UP, S.HEALTHY)):
            # A first verdict, or a first good one after "no evidence yet": news to nobody.
            holder["status"] = {"status": candidate, "since": now_ms, "reason": reason, "silent": silent,
                                "pending_since": -1, "initial": cur is None and candidate == S.UNKNOWN,
                                "cause": cause}
            return
        if candidate == cur["status"]:
            if cause != cur.get("cause") and candidate not in (S.CAUGHT_UP, S.HEALTHY):
                # Same status, a better-told reason (unknown -> partitioned as evidence comes in;
                # a quorum degraded before and now because of a network partition).
                self._event("cause", replica_id=rid, role=holder.get("role"), now_ms=now_ms, status=candidate,
                            cause=cause, previous_cause=cur.get("cause"), reason=reason)
            cur["reason"], cur["pending_since"], cur["cause"] = reason, -1, cause
            return
        hold_ms = self.cfg.recovery_hold_ms if hold else 0
        if hold_ms > 0 and not cur["silent"] and S.is_improvement(kind, cur["status"], candidate):
            if cur["pending_since"] < 0:
                cur["pending_since"] = now_ms
            if now_ms - cur["pending_since"] < hold_ms:
                return
        previous = cur["status"]
        holder["status"] = {"status": candidate, "since": now_ms, "reason": reason, "silent": silent,
                            "pending_since": -1, "cause": cause}
        fields: dict[str, Any] = {"replica_id": rid}
        if rid is not None:
            fields.update(role=holder["role"], cause=cause)
        self._event("transition", now_ms=now_ms, status=candidate, previous_status=previous, reason=reason, **fields)

    def _replica_row(self, rid: int, r: dict[str, Any], now_ms: int, leader: int,
                     view: dict[str, Any] | None) -> dict[str, Any]:
        leader_leo = self.s["leader_leo"]

        def quorum_time(stamp: int) -> int:
            if stamp < 0 or view is None:
                return -1
            return min(now_ms, view["q"] - (view["stamp"] - stamp))

        if rid == leader and r["status"]["status"] == S.CAUGHT_UP:
            lag_records, lag_ms, lf, lcu = 0, 0, now_ms, now_ms
        else:
            lf, lcu = quorum_time(r["last_fetch"]), quorum_time(r["last_caught_up"])
            lag_records = max(0, leader_leo - r["leo"]) if leader_leo >= 0 and r["leo"] >= 0 else None
            lag_ms = max(0, view["stamp"] - r["last_caught_up"]) + max(0, now_ms - view["q"]) \
                if view is not None and r["last_caught_up"] >= 0 else None
        return {
            "kind": "replica", "replica_id": rid, "role": r["role"], "now_ms": now_ms,
            "status": r["status"]["status"], "reason": r["status"]["reason"],
            "cause": r["status"].get("cause") if r["status"]["status"] != S.CAUGHT_UP else None,
            "log_end_offset": r["leo"], "lag_records": lag_records, "lag_ms": lag_ms,
            "last_fetch_ms": lf, "last_fetch_age_ms": max(0, now_ms - lf) if lf >= 0 else None,
            "last_caught_up_ms": lcu,
            "caught_up_ratio": W.caught_up_ratio(r["windows"], now_ms, self.cfg.caught_up_horizon_ms),
            "truncations_total": r["truncations"], "truncated_records_total": r["truncated_records"],
        }


def _signature(row: dict[str, Any]) -> list:
    """What a replica row shows, at the precision the outputs show it (seconds, per mille)."""
    ratio = row["caught_up_ratio"]
    return [row["status"], row["role"], "".join(c for c in row["reason"] if not c.isdigit()),
            row["lag_records"], None if row["lag_ms"] is None else row["lag_ms"] // 1000,
            None if row["last_fetch_age_ms"] is None else row["last_fetch_age_ms"] // 1000,
            None if ratio is None else round(ratio, 3), row["truncations_total"]]


def _shows_change(previous: list | None, row: dict[str, Any]) -> bool:
    """Emit a replica row when anything it shows changed; its lag in records only when it moved
    by more than a tenth (a caught-up replica's lag flips between 0 and 1 at every append)."""
    if previous is None:
        return True
    now = _signature(row)
    if now[:3] != previous[:3] or now[4:] != previous[4:]:
        return True
    before, after = previous[3], now[3]
    if (before is None) != (after is None):
        return True
    return before is not None and abs(after - before) > max(1, before // 10)
