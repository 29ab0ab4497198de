"""The health state machine of one quorum: pure Python, no Spark, no I/O.

`QuorumTracker` wraps the JSON-friendly state dict the Spark processor keeps per key:
`apply(record)` folds one event in (event time from the record), `evaluate(now_ms, ...)`
re-derives every status against the leader's latest log end offset and returns output rows
(see `schema.py`). The processor calls `evaluate` on input and on every processing-time
timer tick, so a replica that stops sending loses its good status without sending anything.

Why one tracker per quorum and not per replica: a replica's status depends on the leader's
latest log end offset and on whether the leader is alive, and the quorum's status on all its
voters. Keyed by (cluster, topic, partition), one processor call sees all of that in its own
state, with no second stateful stage and no join between replica and quorum state; a quorum
has a handful of replicas, so the state stays small.
"""
from __future__ import annotations

from typing import Any

from . import statuses as S
from . import windows as W
from .config import HealthConfig

REPLICA_WINDOW_STATE = {S.CAUGHT_UP: W.CAUGHT_UP, S.UNKNOWN: W.UNKNOWN}  # everything else: lagging
REACHABLE = (S.CAUGHT_UP, S.LAGGING, S.STALLED)
MAX_EPOCH_CHANGES_KEPT = 64


def new_state(cluster_id: str, topic: str, partition: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id, "topic": topic, "partition": int(partition),
        "seq": 0, "started_ms": -1, "last_event_ms": -1, "last_input_proc_ms": -1, "last_eval_ms": -1,
        "timer_ms": -1,
        "epoch": -1, "epoch_first_ms": -1, "elections": 0, "epoch_changes": [],
        "claims": {},             # str(epoch) -> {str(node): last claim ms}
        "hinted_leader": -1,      # leader named by followers for the current epoch
        "hw": -1, "hw_advanced_ms": -1, "leader_leo": -1, "leader_leo_ms": -1,
        "voter_set": None,        # authoritative voter ids when a leader or snapshot told us
        "replicas": {},           # str(id) -> replica dict
        "status": None,           # quorum status entity (see _settle)
    }


def _new_replica(role: str) -> dict[str, Any]:
    return {"role": role, "leo": -1, "fetch_leader_leo": -1, "last_fetch_ms": -1, "last_caught_up_ms": -1,
            "first_fetch_ms": -1, "own_leo": -1, "diverged_from": -1, "seen_ms": -1, "windows": [],
            "truncations": 0, "truncated_records": 0, "status": None}


class QuorumTracker:
    def __init__(self, cfg: HealthConfig, state: dict[str, Any]):
        self.cfg = cfg
        self.s = state
        self.events: list[dict[str, Any]] = []  # transition/window/truncation/forget rows to emit

    # --- input ------------------------------------------------------------------------------

    def apply_all(self, records: list[dict[str, Any]]) -> None:
        """Fold a batch of records in event-time order, evaluating at every tick of event time
        on the way so that fast-forwarded time (a backlog, a synthetic run) still sees every
        transition and every window, not only the state at the end of the batch."""
        for rec in sorted(records, key=lambda r: r["time_ms"]):
            t = int(rec["time_ms"])
            last_eval = self.s["last_eval_ms"]
            if last_eval >= 0 and t - last_eval >= self.cfg.tick_ms:
                self.evaluate(last_eval + self.cfg.tick_ms * ((t - last_eval) // self.cfg.tick_ms),
                              self.s["last_input_proc_ms"], silent=False, emit_snapshot=False)
            self.apply(rec)

    def apply(self, rec: dict[str, Any]) -> None:
        t = int(rec["time_ms"])
        s = self.s
        if s["started_ms"] < 0:
            s["started_ms"] = t
        s["last_event_ms"] = max(s["last_event_ms"], t)
        kind = rec["type"]
        if kind == "fetch":
            self._apply_fetch(rec, t)
        elif kind == "metrics":
            self._apply_metrics(rec, t)
        elif kind == "state_change":
            self._apply_state_change(rec, t)
        elif kind == "quorum_snapshot":
            self._apply_snapshot(rec, t)

    def _apply_fetch(self, rec: dict[str, Any], t: int) -> None:
        epoch, leader = int(rec["leader_epoch"]), int(rec["leader_id"])
        self._note_epoch(epoch, t)
        if rec["outcome"] == "not_leader":
            return  # the emitter answered as a non-leader: no claim, no KIP-836 update
        self._claim(leader, epoch, t)
        if epoch < self.s["epoch"]:
            return  # a zombie's view of the replica must not overwrite the current leader's
        self._leader_progress(int(rec["leader_log_end_offset"]), int(rec["high_watermark"]), t)
        r = self._replica(int(rec["replica_id"]), rec["replica_role"])
        r["seen_ms"] = max(r["seen_ms"], t)
        if rec["outcome"] == "diverging":
            # the leader told it to cut its log back; its next valid fetch says to where
            r["diverged_from"] = max(r.get("diverged_from", -1), int(rec["fetch_offset"]))
        if rec["outcome"] != "valid":
            return
        self._truncation_after_divergence(int(rec["replica_id"]), r, int(rec["fetch_offset"]), t)
        # KIP-836, in the leader's order (facts file): caught up if the fetch reached the
        # leader's end, or reached what the leader's end was at the previous fetch.
        fetch_offset, leader_leo = int(rec["fetch_offset"]), int(rec["leader_log_end_offset"])
        if fetch_offset >= leader_leo:
            r["last_caught_up_ms"] = max(r["last_caught_up_ms"], t)
        elif r["fetch_leader_leo"] > 0 and fetch_offset >= r["fetch_leader_leo"]:
            r["last_caught_up_ms"] = max(r["last_caught_up_ms"], r["last_fetch_ms"])
        r["fetch_leader_leo"] = leader_leo
        r["last_fetch_ms"] = max(r["last_fetch_ms"], t)
        if r["first_fetch_ms"] < 0:
            r["first_fetch_ms"] = t
        r["leo"] = fetch_offset

    def _apply_metrics(self, rec: dict[str, Any], t: int) -> None:
        node, epoch = int(rec["node_id"]), int(rec["epoch"])
        self._note_epoch(epoch, t)
        voter_set = rec.get("voter_set")
        role = "observer" if rec["state"] == "observer" else "voter"
        if voter_set is not None and len(voter_set) > 0 and node not in {int(v) for v in voter_set}:
            role = "observer"
        r = self._replica(node, role)
        r["seen_ms"] = max(r["seen_ms"], t)
        self._own_log_end(node, r, int(rec["log_end_offset"]), t)
        if rec["state"] == "leader":
            self._claim(node, epoch, t)
            if epoch == self.s["epoch"]:
                self._leader_progress(int(rec["log_end_offset"]), int(rec["high_watermark"]), t)
                if voter_set is not None and len(voter_set) > 0:
                    self.s["voter_set"] = sorted({int(v) for v in voter_set})
                # The leader reports itself caught up now (KIP-836 as implemented).
                r["leo"] = int(rec["log_end_offset"])
                r["last_fetch_ms"] = max(r["last_fetch_ms"], t)
                r["last_caught_up_ms"] = max(r["last_caught_up_ms"], t)
        elif epoch == self.s["epoch"] and int(rec["leader_id"]) >= 0:
            self.s["hinted_leader"] = int(rec["leader_id"])

    def _apply_state_change(self, rec: dict[str, Any], t: int) -> None:
        node, epoch = int(rec["node_id"]), int(rec["epoch"])
        self._note_epoch(epoch, t)
        if rec["to_state"] == "leader":
            self._claim(node, epoch, t)
        else:
            # A node that steps down stops claiming at once (no need to wait for its claim to age).
            self.s["claims"].get(str(epoch), {}).pop(str(node), None)
            if epoch == self.s["epoch"] and int(rec["leader_id"]) >= 0:
                self.s["hinted_leader"] = int(rec["leader_id"])

    def _apply_snapshot(self, rec: dict[str, Any], t: int) -> None:
        epoch, leader = int(rec["leader_epoch"]), int(rec["leader_id"])
        self._note_epoch(epoch, t)
        if leader >= 0:
            self._claim(leader, epoch, t)
        if epoch < self.s["epoch"]:
            return
        voters = [] if rec.get("voters") is None else list(rec["voters"])
        observers = [] if rec.get("observers") is None else list(rec["observers"])
        self.s["voter_set"] = sorted(int(v["replica_id"]) for v in voters)
        for role, group in (("voter", voters), ("observer", observers)):
            for v in group:
                rid = int(v["replica_id"])
                r = self._replica(rid, role)
                r["role"] = role
                leo = int(v["log_end_offset"])
                if leo >= 0:
                    self._own_log_end(rid, r, leo, t)
                    r["leo"] = leo
                    if rid == leader:
                        self._leader_progress(leo, int(rec["high_watermark"]), t)
                fetch_ms = int(v["last_fetch_timestamp_ms"])
                r["last_fetch_ms"] = max(r["last_fetch_ms"], fetch_ms)
                if fetch_ms >= 0 and r["first_fetch_ms"] < 0:
                    r["first_fetch_ms"] = fetch_ms
                r["last_caught_up_ms"] = max(r["last_caught_up_ms"], int(v["last_caught_up_timestamp_ms"]))
                r["seen_ms"] = max(r["seen_ms"], fetch_ms)  # listed is not heard from: its fetch is
        if leader < 0 and int(rec["high_watermark"]) > self.s["hw"]:
            self._leader_progress(-1, int(rec["high_watermark"]), t)

    # --- input helpers -------------------------------------------------------------------------

    def _replica(self, rid: int, role: str) -> dict[str, Any]:
        reps = self.s["replicas"]
        r = reps.get(str(rid))
        if r is None:
            r = reps[str(rid)] = _new_replica(role)
        elif self.s["voter_set"] is None:
            r["role"] = role
        return r

    def _note_epoch(self, epoch: int, t: int) -> None:
        s = self.s
        if epoch <= s["epoch"]:
            return
        if s["epoch"] >= 0:
            changes = epoch - s["epoch"]
            s["elections"] += changes
            s["epoch_changes"].extend([t] * min(changes, MAX_EPOCH_CHANGES_KEPT))
            del s["epoch_changes"][:-MAX_EPOCH_CHANGES_KEPT]
        s["epoch"], s["epoch_first_ms"] = epoch, t
        s["hinted_leader"], s["leader_leo"], s["leader_leo_ms"] = -1, -1, -1
        for r in s["replicas"].values():
            r["fetch_leader_leo"] = -1  # KIP-836 state is the leader's own: a new leader starts afresh
        for e in [e for e in s["claims"] if int(e) < epoch - 8]:
            del s["claims"][e]

    def _claim(self, node: int, epoch: int, t: int) -> None:
        claims = self.s["claims"].setdefault(str(epoch), {})
        claims[str(node)] = max(claims.get(str(node), -1), t)

    def _leader_progress(self, leader_leo: int, hw: int, t: int) -> None:
        s = self.s
        if leader_leo >= 0 and t >= s["leader_leo_ms"]:
            s["leader_leo"], s["leader_leo_ms"] = leader_leo, t
        if hw > s["hw"]:
            s["hw"], s["hw_advanced_ms"] = hw, t

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
        diverged, r["diverged_from"] = r.get("diverged_from", -1), -1
        if 0 <= fetch_offset < diverged and (r["own_leo"] < 0 or r["own_leo"] > fetch_offset):
            self._truncated(rid, r, diverged, fetch_offset, t)
            r["own_leo"] = fetch_offset

    def _truncated(self, rid: int, r: dict[str, Any], from_leo: int, to_leo: int, t: int) -> None:
        lost = from_leo - to_leo
        r["truncations"] += 1
        r["truncated_records"] += lost
        self.events.append({"kind": "truncation", "replica_id": rid, "role": r["role"], "now_ms": t,
                            "records_lost": lost, "log_end_offset": to_leo,
                            "reason": f"log end offset {from_leo} -> {to_leo}"})

    # --- evaluation ------------------------------------------------------------------------------

    def evaluate(self, now_ms: int, proc_ms: int, silent: bool, emit_snapshot: bool = True) -> list[dict[str, Any]]:
        """Re-derive every status at `now_ms` (the quorum's clock) and return the rows to emit."""
        cfg, s = self.cfg, self.s
        if not silent:
            # Event-time evaluations never go back. Extrapolated (silent) ones do not move this
            # clock: if the "silence" was a delayed input, the late records are then judged at
            # their own time, not at a clock that ran ahead while they were on their way.
            now_ms = max(now_ms, s["last_eval_ms"])
            s["last_eval_ms"] = now_ms
        epoch = s["epoch"]
        current_claims = {int(n): ms for n, ms in s["claims"].get(str(epoch), {}).items()
                          if now_ms - ms <= cfg.leader_claim_window_ms}
        leader = max(current_claims, key=current_claims.get) if current_claims else -1
        leader_alive = leader >= 0 and now_ms - current_claims[leader] <= cfg.unreachable_after_ms
        if not leader_alive:
            leader = -1
        zombies = {int(n) for e, claims in s["claims"].items() if int(e) < epoch
                   for n, ms in claims.items()
                   if ms > s["epoch_first_ms"] and now_ms - ms <= cfg.leader_claim_window_ms} - set(current_claims)

        voter_set = s["voter_set"]
        if voter_set is not None:
            for v in voter_set:
                self._replica(v, "voter")
            for rid, r in s["replicas"].items():
                r["role"] = "voter" if int(rid) in voter_set else "observer"

        rows: list[dict[str, Any]] = []
        for rid in sorted(s["replicas"], key=int):
            r = s["replicas"][rid]
            if r["role"] == "observer" and now_ms - max(r["seen_ms"], r["last_fetch_ms"]) > cfg.observer_forget_ms:
                del s["replicas"][rid]
                self.events.append({"kind": "forget", "replica_id": int(rid), "role": "observer", "now_ms": now_ms,
                                    "reason": f"observer silent for {cfg.observer_forget_ms} ms"})
                continue
            status, reason = self._replica_candidate(int(rid), r, now_ms, leader, leader_alive)
            self._settle(r, status, reason, now_ms, silent, "replica", int(rid))
            closed = W.extend(r["windows"], now_ms, REPLICA_WINDOW_STATE.get(r["status"]["status"], W.LAGGING),
                              cfg.caught_up_horizon_ms, cfg.max_windows_per_replica)
            if closed is not None:
                self.events.append({"kind": "window", "replica_id": int(rid), "role": r["role"], "now_ms": now_ms,
                                    "status": closed[2], "window_start_ms": closed[0], "window_end_ms": closed[1]})
            if emit_snapshot:
                rows.append(self._replica_row(int(rid), r, now_ms, leader))

        voters = [r for r in s["replicas"].values() if r["role"] == "voter"]
        n_voters = len(voter_set) if voter_set is not None else len(voters)
        caught_up = sum(1 for r in voters if r["status"]["status"] == S.CAUGHT_UP)
        reachable = sum(1 for r in voters if r["status"]["status"] in REACHABLE)
        # Unknown voters do not degrade the quorum: with a live leader, a voter that has not
        # fetched becomes unreachable after the fetch timeout anyway; before that it is just new.
        behind = sorted(int(rid) for rid, r in s["replicas"].items()
                        if r["role"] == "voter" and r["status"]["status"] in (S.LAGGING, S.STALLED, S.UNREACHABLE))
        majority = n_voters > 0 and reachable > n_voters // 2
        changes_window = sum(1 for t in s["epoch_changes"] if now_ms - t <= cfg.storm_window_ms)
        s["epoch_changes"] = [t for t in s["epoch_changes"] if now_ms - t <= cfg.storm_window_ms]
        hw_since = s["hw_advanced_ms"] if s["hw_advanced_ms"] >= 0 else s["started_ms"]
        hw_age = now_ms - hw_since if hw_since >= 0 else None

        if len(current_claims) >= 2:
            status, reason = S.SPLIT_BRAIN, f"nodes {sorted(current_claims)} claim epoch {epoch}"
        elif not leader_alive:
            status, reason = S.LEADERLESS, f"no leader heard for epoch {epoch} within {cfg.unreachable_after_ms} ms"
        elif not majority:
            status, reason = S.NO_MAJORITY, f"{reachable} of {n_voters} voters reachable"
        elif hw_age is None or hw_age > cfg.hw_stall_after_ms:
            status, reason = S.STALLED_QUORUM, f"high watermark {s['hw']} not advanced for {hw_age} ms"
        elif behind:
            status, reason = S.DEGRADED, f"voters {behind} not caught up"
        elif zombies:
            status, reason = S.DEGRADED, f"zombie leaders {sorted(zombies)}"
        elif changes_window >= cfg.storm_epoch_changes:
            status, reason = S.DEGRADED, f"{changes_window} epoch changes within {cfg.storm_window_ms} ms"
        else:
            status, reason = S.HEALTHY, "all voters caught up"
        holder = {"status": s["status"]}
        self._settle(holder, status, reason, now_ms, silent, "quorum", None)
        s["status"] = holder["status"]

        if emit_snapshot:
            s["seq"] += 1
            rows.append({
                "kind": "quorum", "now_ms": now_ms, "status": s["status"]["status"], "reason": s["status"]["reason"],
                "leader_id": leader, "leader_epoch": epoch, "high_watermark": s["hw"], "hw_age_ms": hw_age,
                "leader_log_end_offset": s["leader_leo"], "voters": n_voters, "voters_caught_up": caught_up,
                "voters_reachable": reachable, "majority_reachable": majority, "elections_total": s["elections"],
                "epoch_changes_window": changes_window, "leaders_claimed": len(current_claims),
                "zombie_leaders": len(zombies)})
        out = self.events + rows if emit_snapshot else []
        if emit_snapshot:
            self.events = []
        for row in out:
            row.update({"cluster_id": s["cluster_id"], "topic": s["topic"], "partition": s["partition"],
                        "seq": s["seq"], "proc_ms": proc_ms, "last_input_proc_ms": s["last_input_proc_ms"],
                        "silent": silent})
        return out

    def _replica_candidate(self, rid: int, r: dict[str, Any], now_ms: int, leader: int,
                           leader_alive: bool) -> tuple[str, str]:
        cfg, s = self.cfg, self.s
        if rid == leader:
            return S.CAUGHT_UP, "leader"
        if not leader_alive:
            return S.UNKNOWN, "no live leader to judge against"
        # Silence counts from the last fetch, or from when this leader took over (or the
        # monitor started) for a replica that never fetched from it.
        silent_since = max(r["last_fetch_ms"], s["epoch_first_ms"], s["started_ms"])
        if now_ms - silent_since > cfg.unreachable_after_ms:
            return S.UNREACHABLE, f"no valid fetch for {now_ms - silent_since} ms"
        if r["last_fetch_ms"] < 0:
            return S.UNKNOWN, "no valid fetch seen yet"
        lcu = r["last_caught_up_ms"]
        if lcu >= 0 and now_ms - lcu <= cfg.lagging_after_ms:
            return S.CAUGHT_UP, "caught up"
        behind_since = lcu if lcu >= 0 else r["first_fetch_ms"]
        if now_ms - behind_since > cfg.stall_after_ms:
            return S.STALLED, f"fetching but not caught up for {now_ms - behind_since} ms"
        return S.LAGGING, f"not caught up for {now_ms - behind_since} ms"

    def _settle(self, holder: dict[str, Any], candidate: str, reason: str, now_ms: int, silent: bool,
                kind: str, rid: int | None) -> None:
        """Apply hysteresis: worse statuses apply at once, better ones after recovery_hold_ms.
        A status entered while the quorum was silent is no evidence, so it clears at once."""
        cur = holder["status"]
        if cur is None:
            holder["status"] = {"status": candidate, "since": now_ms, "reason": reason, "silent": silent,
                                "pending_since": -1}
            return
        if candidate == cur["status"]:
            cur["reason"], cur["pending_since"] = reason, -1
            return
        hold = self.cfg.recovery_hold_ms
        if hold > 0 and not cur["silent"] and S.is_improvement(kind, cur["status"], candidate):
            if cur["pending_since"] < 0:
                cur["pending_since"] = now_ms
            if now_ms - cur["pending_since"] < hold:
                return
        previous = cur["status"]
        holder["status"] = {"status": candidate, "since": now_ms, "reason": reason, "silent": silent,
                            "pending_since": -1}
        event = {"kind": "transition", "now_ms": now_ms, "status": candidate, "previous_status": previous,
                 "reason": reason}
        if rid is not None:
            event.update({"replica_id": rid, "role": holder["role"]})
        self.events.append(event)

    def _replica_row(self, rid: int, r: dict[str, Any], now_ms: int, leader: int) -> dict[str, Any]:
        leader_leo = self.s["leader_leo"]
        lcu, lf = r["last_caught_up_ms"], r["last_fetch_ms"]
        if rid == leader:  # the leader reports itself fetched and caught up now (KIP-836)
            lag_records, lag_ms, lf = 0, 0, now_ms
        else:
            lag_records = max(0, leader_leo - r["leo"]) if leader_leo >= 0 and r["leo"] >= 0 else None
            lag_ms = max(0, now_ms - lcu) if lcu >= 0 else None
        return {
            "kind": "replica", "replica_id": rid, "role": r["role"], "now_ms": now_ms,
            "status": r["status"]["status"], "reason": r["status"]["reason"],
            "log_end_offset": r["leo"], "lag_records": lag_records, "lag_ms": lag_ms,
            "last_fetch_ms": lf, "last_fetch_age_ms": max(0, now_ms - lf) if lf >= 0 else None,
            "last_caught_up_ms": lcu, "caught_up_ratio": W.caught_up_ratio(r["windows"]),
            "truncations_total": r["truncations"], "truncated_records_total": r["truncated_records"],
        }
