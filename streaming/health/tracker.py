"""The health state machine of one quorum: pure Python, no Spark, no I/O.

`QuorumTracker` wraps a quorum's state (`QuorumState`, state.py), which the Spark processor keeps
per quorum: `apply_all(records)` folds a batch of events in (evaluating at every tick of the
quorum's clock on the way), `evaluate(proc_ms, silent)` re-derives every status and returns
output rows (see `schema.py`). The processor calls `evaluate` on input and on every
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
from .hysteresis import settle
from .leadership import Leadership
from .quorum_verdict import LeaderEvidence, QuorumEvidence, leader_evidence, quorum_evidence, quorum_verdict
from .replica_evidence import ReplicaEvidence
from .replica_verdicts import CAMPAIGNING, ReplicaJudge, ReplicaVerdict
from .rows import quorum_row, replica_row, shows_change, signature
from .state import PollState, QuorumState, Refusal

REPLICA_WINDOW_STATE = {S.CAUGHT_UP: W.CAUGHT_UP, S.UNKNOWN: W.UNKNOWN}  # everything else: lagging
REFUSALS = ("fenced", "unknown_leader_epoch", "offset_out_of_range", "inconsistent_cluster_id")

COLLECTOR = "collector"
# Poll errors that say something of the quorum: nothing listens where its nodes were. Any other
# client failure (timeout, unknown_host, connection_error, ...) is the collector's path failing,
# and so is a secured cluster refusing the collector (its credentials, its trust, its ACLs),
# though that comes as an answer.
EVIDENT_POLL_ERRORS = ("connection_refused",)
NETWORK_PARTITION = "network_partition"  # the quorum's cause while its reason names a partition
NODE_RECORDS = ("fetch", "metrics", "state_change")  # the records a node writes itself


class QuorumTracker:
    def __init__(self, cfg: HealthConfig, state: QuorumState, run_id: int | None = None):
        """`run_id` identifies the job run: with one, a replica's row is emitted only when what it
        shows changed (and in full once per run, for the run's fresh view of every quorum); with
        None, every evaluation emits every row."""
        self.cfg = cfg
        self.s = state
        self.run_id = run_id
        self.events: list[dict[str, Any]] = []  # event rows to emit with the next snapshot
        self.window = cfg.unreachable_after_ms  # sources heard within this long move the clock
        self._late = 0  # how late the record being folded in came (clocks.observe)
        self.lead = Leadership(cfg, state, self._event)
        self.judge = ReplicaJudge(cfg, state)
        self.replicas = ReplicaEvidence(state, self.judge, self._event)

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
            last_eval, now = self.s.last_eval_ms, self.s.clock["now"]
            if last_eval < 0:
                last_eval = self.s.started_ms
            if last_eval >= 0 and now - last_eval >= self.cfg.tick_ms:
                tick = last_eval + self.cfg.tick_ms * ((now - last_eval) // self.cfg.tick_ms)
                self._evaluate(tick, self.s.last_input_proc_ms, silent=False, emit_snapshot=False)
            self._fold(rec, *observed)

    def _observe(self, rec: dict[str, Any]) -> tuple[int | None, int] | None:
        """Move the quorum's clock with one record; returns (the stamp to trust, None for an
        outlier; its quorum time), or None for a record refused."""
        kind = rec["type"]
        if kind != "quorum_poll_error" and self._implausible(rec):
            return None
        if kind in NODE_RECORDS:
            source = f"node-{rec['leader_id'] if kind == 'fetch' else rec['node_id']}"
        else:
            source = COLLECTOR
        stamp = int(rec["time_ms"])
        lead = f"node-{self.s.leader}" if self.s.leader >= 0 else None
        t, ahead, late = C.observe(self.s.clock, source, stamp, self.window, lead)
        self._late = late
        # Further ahead of every other clock than any delay explains: this one stamp is wrong.
        # Its content still counts, at the quorum's time, on its clock's own pace.
        return (None if ahead > self.window else stamp), t

    def _fold(self, rec: dict[str, Any], stamp: int | None, t: int) -> None:
        kind = rec["type"]
        s = self.s
        if s.started_ms < 0:
            s.started_ms = t
        s.last_event_ms = max(s.last_event_ms, t)
        if kind in NODE_RECORDS:
            s.nodes_heard_ms = max(s.nodes_heard_ms, t)
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
        if s.epoch < 0:
            return False
        elapsed = max(0, s.clock["now"] - s.epoch_first_ms)
        bound = s.epoch + self.cfg.max_epoch_jump + 2 * elapsed // self.cfg.election_timeout_ms
        if epoch <= bound:
            return False
        node = rec.get("node_id", rec.get("leader_id"))
        self._event("rejected", replica_id=None, status="implausible_epoch", now_ms=s.clock["now"],
                    reason=f"{rec['type']} from node {node} claims epoch {epoch}, current {s.epoch} "
                           f"(at most {bound} reachable since)")
        return True

    def _apply_fetch(self, rec: dict[str, Any], stamp: int, t: int) -> None:
        epoch, leader, rid = int(rec["leader_epoch"]), int(rec["leader_id"]), int(rec["replica_id"])
        if rec["outcome"] == "not_leader":
            return  # the emitter answered as a non-leader: no claim, no KIP-836 update
        publishers = self.s.fetch_publishers
        if leader not in publishers:
            publishers.append(leader)
        self.lead.claim(leader, epoch, t)
        if rec["outcome"] == "valid" and rid != leader and rec["replica_role"] == "voter":
            self.lead.support(leader, epoch, rid, t)
        self.lead.settle_epoch(epoch, t)
        if epoch != self.s.epoch or leader != self.s.leader:
            return  # a zombie's or a rival's view must not overwrite the current leader's
        trusted = stamp is not None
        stamp = self.lead.leader_clock(leader, epoch, stamp, t, via="node")
        self.lead.leader_alive(t, 0)
        self.lead.leader_progress(int(rec["leader_log_end_offset"]), int(rec["high_watermark"]), t)
        r = self.replicas.get(rid, rec["replica_role"])
        r.seen_ms = max(r.seen_ms, t)
        if rec["outcome"] == "diverging":
            # the leader told it to cut its log back; its next valid fetch says to where
            r.diverged_from = max(r.diverged_from, int(rec["fetch_offset"]))
        if rec["outcome"] in REFUSALS:
            count = r.rejected.count + 1 if r.rejected is not None else 1
            r.rejected = Refusal(rec["outcome"], stamp, count)
        if rec["outcome"] != "valid":
            return
        # a record standing for fetches dropped before it (reduce.py) carries their gaps' measures
        stands_for = rec.get(R.FETCHES) or 1
        if stands_for > 1:
            r.gap_peak_ms, r.gap_ms = R.fold_gaps(r.gap_peak_ms, r.gap_ms, rec)
        elif r.last_fetch >= 0 and stamp > r.last_fetch:
            gap = stamp - r.last_fetch
            r.gap_ms = gap if r.gap_ms < 0 else (2 * r.gap_ms + gap) // 3
            # the longest recent gap, fading by a quarter a fetch (replica_verdicts.py judges by it)
            r.gap_peak_ms = R.peak_step(r.gap_peak_ms, gap)
        r.rejected, r.campaigns, r.campaign_epoch = None, 0, -1
        fetch_offset, leader_leo = int(rec["fetch_offset"]), int(rec["leader_log_end_offset"])
        self.replicas.truncation_after_divergence(rid, r, fetch_offset, t)
        # KIP-836, in the leader's order (facts file), on the leader's own clock: caught up if the
        # fetch reached the leader's end, or reached what the end was at the previous fetch. Not
        # across dropped fetches: the previous one is not the one before this.
        if fetch_offset >= leader_leo:
            r.last_caught_up = max(r.last_caught_up, stamp)
        elif stands_for == 1 and r.fetch_leader_leo > 0 and fetch_offset >= r.fetch_leader_leo:
            r.last_caught_up = max(r.last_caught_up, r.last_fetch)
        # The leader's own result, when the record carries it: in Kafka order the same as the
        # replay above, and still right when records before this one were lost or came before
        # the job started. Not from an outlier stamp: its clock is out of line with the view's.
        carried = rec.get("last_caught_up_timestamp_ms")
        if trusted and carried is not None and carried >= 0:
            r.last_caught_up = max(r.last_caught_up, min(int(carried), stamp))
        r.fetch_leader_leo = leader_leo
        r.last_fetch = max(r.last_fetch, stamp)
        if r.first_fetch < 0:
            r.first_fetch = stamp
        r.leo = fetch_offset

    def _apply_metrics(self, rec: dict[str, Any], stamp: int, t: int) -> None:
        node, epoch, leader = int(rec["node_id"]), int(rec["epoch"]), int(rec["leader_id"])
        state, hw = rec["state"], int(rec["high_watermark"])
        voter_set = rec.get("voter_set")
        voter_set = [int(v) for v in voter_set] if voter_set is not None else []  # pandas gives arrays
        self.lead.report(node, epoch, state, leader, t, hw)
        role = "observer" if state == "observer" else "voter"
        if voter_set:
            role = "voter" if node in {int(v) for v in voter_set} else "observer"
        r = self.replicas.get(node, role)
        r.seen_ms = max(r.seen_ms, t)
        self.replicas.own_record(r, state, epoch, t - self._late, periodic=True)
        self.replicas.own_log_end(node, r, int(rec["log_end_offset"]), t)
        if state == "leader":
            self.lead.claim(node, epoch, t)
        elif leader >= 0 and role == "voter" and state in ("follower", "voted", "unattached"):
            self.lead.support(leader, epoch, node, t)
        self.lead.settle_epoch(epoch, t)
        s = self.s
        if voter_set and (state == "leader" and epoch == s.epoch or s.voter_set is None):
            self.lead.set_voters(sorted({int(v) for v in voter_set}), t, f"node {node}'s metrics")
        if epoch != s.epoch:
            return
        if state == "leader" and node == s.leader:
            if node in s.fetch_publishers:
                # its fetches come on the same stream, in order: its now is its view's now
                self.lead.leader_clock(node, epoch, stamp, t, via="node")
                self.lead.leader_alive(t, 0)
            else:
                # A node that publishes no fetches (a Kafka node read through its metrics endpoint):
                # alive and committing, but its replicas' fetches are known only as of the last
                # DescribeQuorum snapshot, so its view does not move on.
                self.lead.leader_alive(t, self._poll_allowance())
            self.lead.leader_progress(int(rec["log_end_offset"]), hw, t)
            r.leo = int(rec["log_end_offset"])
        elif leader >= 0 and leader == s.leader and self.lead.hw_advanced_by(node, hw):
            # A follower naming the leader whose high watermark moved: the leader commits, so it
            # is alive, even if its own records do not reach us (its publisher is down).
            self.lead.leader_alive(t, self._poll_allowance() if leader not in s.fetch_publishers else 0)
            self.lead.leader_progress(-1, hw, t)

    def _apply_state_change(self, rec: dict[str, Any], t: int) -> None:
        node, epoch, leader = int(rec["node_id"]), int(rec["epoch"]), int(rec["leader_id"])
        self.lead.report(node, epoch, rec["to_state"], leader, t, None)
        r = self.s.replicas.get(str(node))
        if r is not None:
            self.replicas.own_record(r, rec["to_state"], epoch, t - self._late, periodic=False,
                             entering=rec["from_state"] not in CAMPAIGNING)
        if rec["to_state"] == "leader":
            self.lead.claim(node, epoch, t)
        else:
            # A node that steps down stops claiming at once (no need to wait for its claim to age).
            for claims in self.s.claims.values():
                claims.pop(str(node), None)
            if leader >= 0 and leader != node and rec["to_state"] in ("follower", "voted", "unattached"):
                self.lead.support(leader, epoch, node, t)
        self.lead.settle_epoch(epoch, t)

    def _apply_snapshot(self, rec: dict[str, Any], t: int) -> None:
        """DescribeQuorum as answered by the leader: its row's last fetch time is its clock's now."""
        s = self.s
        epoch, leader = int(rec["leader_epoch"]), int(rec["leader_id"])
        interval = int(rec.get("poll_interval_ms") or -1)
        voters = [] if rec.get("voters") is None else list(rec["voters"])  # pandas gives arrays
        observers = [] if rec.get("observers") is None else list(rec["observers"])
        s.poll = PollState(interval, ok_ms=t, answered_by=int(rec.get("answered_by") or -1))
        self._refused(rec, t)
        leader_row = next((v for v in voters if int(v["replica_id"]) == leader), None)
        leader_now = int(leader_row["last_fetch_timestamp_ms"]) if leader_row is not None else -1
        if leader_now < 0:
            leader_now = max([int(v["last_fetch_timestamp_ms"]) for v in voters + observers] + [-1])
        if leader >= 0:
            self.lead.report(leader, epoch, "leader", leader, t, int(rec["high_watermark"]))
            self.lead.claim(leader, epoch, t)
            for v in voters:
                rid, fetched = int(v["replica_id"]), int(v["last_fetch_timestamp_ms"])
                if rid != leader and fetched >= 0 and leader_now - fetched <= self.cfg.unreachable_after_ms:
                    self.lead.support(leader, epoch, rid, t)
                    self.lead.report(rid, epoch, "follower", leader, t, None)
        self.lead.set_voters(sorted(int(v["replica_id"]) for v in voters), t, "a DescribeQuorum snapshot")
        self.lead.settle_epoch(epoch, t)
        if leader < 0 or epoch != s.epoch or leader != s.leader or leader_now < 0:
            return
        allowance = max(interval, 0)
        stamp = self.lead.leader_clock(leader, epoch, leader_now, t, via="poll")
        self.lead.leader_alive(t, allowance)
        for role, group in (("voter", voters), ("observer", observers)):
            for v in group:
                rid = int(v["replica_id"])
                r = self.replicas.get(rid, role)
                self.replicas.same_directory(rid, r, v.get("directory_id"), t)
                r.role = role
                leo = int(v["log_end_offset"])
                if leo >= 0:
                    self.replicas.own_log_end(rid, r, leo, t)
                    r.leo = leo
                    if rid == leader:
                        self.lead.leader_progress(leo, int(rec["high_watermark"]), t)
                fetched = int(v["last_fetch_timestamp_ms"])
                if fetched >= 0:
                    # the leader's stamps, capped at its now (the leader's clock caps itself)
                    r.last_fetch = max(r.last_fetch, min(fetched, stamp))
                    if r.first_fetch < 0:
                        r.first_fetch = r.last_fetch
                    r.seen_ms = max(r.seen_ms, t - (stamp - r.last_fetch))
                caught = int(v["last_caught_up_timestamp_ms"])
                if caught >= 0:
                    r.last_caught_up = max(r.last_caught_up, min(caught, stamp))

    def _apply_poll_error(self, rec: dict[str, Any], t: int) -> None:
        """A DescribeQuorum that failed. An error answer (NOT_LEADER_OR_FOLLOWER: no leader) or
        refused connections (nothing listens) are evidence about the quorum; a poll that got no
        answer at all (timeout, an unknown host, a connection that broke) is evidence about the
        collector's path to it, and says nothing of the voters."""
        poll = self.s.poll = self.s.poll or PollState()
        code = int(rec.get("error_code") if rec.get("error_code") is not None else -1)
        poll.error = str(rec.get("error") or code)
        poll.blind = poll.error in kafka_failures.COLLECTOR_SIDE or (code < 0 and poll.error not in EVIDENT_POLL_ERRORS)
        poll.interval = int(rec.get("poll_interval_ms") or -1)
        poll.failures += 1
        poll.answered_by = int(rec.get("answered_by") if rec.get("answered_by") is not None else -1)
        blind = poll.blind
        self._refused(rec, t)
        if not blind:
            # No leader answered at t: the allowance for the gap between polls is spent.
            self.s.leader_alive_allowance_ms = 0

    def _refused(self, rec: dict[str, Any], t: int) -> None:
        """The nodes whose metrics endpoint refused the collector's connection: gone."""
        for node in rec.get("refused_nodes") or ():
            r = self.s.replicas.get(str(int(node)))
            if r is not None:
                r.refused_ms = max(r.refused_ms, t)

    def _poll_allowance(self) -> int:
        """The gap between two polls: how long a snapshot's view stays the latest there is."""
        poll = self.s.poll
        return max(poll.interval, 0) if poll is not None else 0

    def _event(self, kind: str, **fields: Any) -> None:
        self.s.event_seq += 1
        self.events.append({"kind": kind, "event_seq": self.s.event_seq, **fields})


    # --- evaluation ------------------------------------------------------------------------------

    def evaluate(self, proc_ms: int | None, silent: bool = False, emit_snapshot: bool = True,
                 wall_ms: int | None = None) -> list[dict[str, Any]]:
        """Re-derive every status now and return the rows to emit. `proc_ms` is the micro-batch's
        processing time (stamped on the rows); `wall_ms` (default `proc_ms`) the job's wall clock:
        with input, silence is counted from it; on a timer tick with no input (`silent`) the
        quorum's clock moves on by the wall-clock time since. None: event time only (tests)."""
        clock = self.s.clock
        wall_ms = proc_ms if wall_ms is None else wall_ms
        if wall_ms is not None:
            if silent:
                C.observe_processing(clock, wall_ms)
            else:
                C.anchor_processing(clock, wall_ms)
        return self._evaluate(clock["now"], proc_ms, silent, emit_snapshot)

    def _evaluate(self, now_ms: int, proc_ms: int | None, silent: bool, emit_snapshot: bool) -> list[dict[str, Any]]:
        """The replicas judged, then the quorum, and the rows that show them (with the events
        since the last snapshot), or none if `emit_snapshot` is False (a tick inside a batch)."""
        s = self.s
        if now_ms < 0:
            return []
        if not silent:
            s.last_eval_ms = max(now_ms, s.last_eval_ms)
        C.forget_silent(s.clock, self.cfg.observer_forget_ms)
        lead = leader_evidence(self.cfg, s, self.lead, self.judge, now_ms)
        full = self.run_id is None or s.emitted_run != self.run_id
        if emit_snapshot:
            s.emitted_run = self.run_id
        verdicts, rows = self._judge_replicas(now_ms, lead, silent, emit_snapshot, full)
        evidence = quorum_evidence(self.cfg, s, self.judge, now_ms, lead, verdicts)
        self.lead.forget_old_changes(now_ms)
        self._settle_quorum(evidence, silent)
        if emit_snapshot and s.status is not None:
            s.seq += 1
            rows.append(quorum_row(s, evidence))
        out = self.events + rows if emit_snapshot else []
        if emit_snapshot:
            self.events = []
        for row in out:
            row.update({"cluster_id": s.cluster_id, "topic": s.topic, "partition": s.partition, "seq": s.seq,
                        "proc_ms": proc_ms, "last_input_proc_ms": s.last_input_proc_ms, "silent": silent})
        return out

    def _judge_replicas(self, now_ms: int, lead: LeaderEvidence, silent: bool, emit_snapshot: bool,
                        full: bool) -> tuple[dict[int, ReplicaVerdict], list[dict[str, Any]]]:
        """Every replica's verdict (observers silent too long forgotten), held by hysteresis, its
        caught-up window extended; its row when it shows a change (every row when `full`)."""
        cfg, s = self.cfg, self.s
        if s.voter_set is not None:
            for v in s.voter_set:
                self.replicas.get(v, "voter")
            for rid, r in s.replicas.items():
                r.role = "voter" if int(rid) in s.voter_set else "observer"
        verdicts: dict[int, ReplicaVerdict] = {}
        rows: list[dict[str, Any]] = []
        for key in sorted(s.replicas, key=int):
            r, rid = s.replicas[key], int(key)
            if r.role == "observer" and now_ms - r.seen_ms > cfg.observer_forget_ms:
                del s.replicas[key]
                self._event("forget", replica_id=rid, role="observer", now_ms=now_ms,
                            reason=f"observer silent for {cfg.observer_forget_ms} ms")
                continue
            verdict = verdicts[rid] = self.judge.verdict(rid, r, now_ms, lead.alive, lead.view, lead.view_age,
                                                         lead.handover)
            if verdict.trend is not None:
                r.lag_ref = verdict.trend  # the `behind` rule's lag sample: the next trend's base
            # The leader's own row is never held: it leads now, whatever it was a moment ago.
            r.status = settle(r.status, verdict.status, verdict.reason, now_ms, silent, kind="replica",
                              hold_ms=cfg.recovery_hold_ms if rid != s.leader else 0, cause=verdict.cause,
                              event=self._event, rid=rid, role=r.role)
            closed = W.extend(r.windows, now_ms, REPLICA_WINDOW_STATE.get(r.status.status, W.LAGGING),
                              cfg.caught_up_horizon_ms)
            if closed is not None:
                self._event("window", replica_id=rid, role=r.role, now_ms=now_ms, status=closed[2],
                            window_start_ms=closed[0], window_end_ms=closed[1])
            if emit_snapshot:
                row = replica_row(cfg, s, rid, r, now_ms, lead.view)
                if full or shows_change(r.sig, row):
                    r.sig = signature(row)
                    rows.append(row)
        return verdicts, rows

    def _settle_quorum(self, e: QuorumEvidence, silent: bool) -> None:
        verdict = quorum_verdict(e, self.cfg, self.s.status)
        if verdict is None:
            return
        status, reason = verdict
        # A partition named while the status stays (degraded before, degraded now) is news to an
        # operator: the quorum's cause, so that its change is an event of its own.
        cause = NETWORK_PARTITION if e.partition and reason == e.partition else None
        self.s.status = settle(self.s.status, status, reason, e.now_ms, silent, kind="quorum",
                               hold_ms=self.cfg.recovery_hold_ms, cause=cause, event=self._event)
