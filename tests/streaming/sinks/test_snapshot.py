"""The driver's snapshot: latest verdict per quorum, vanished series, verdicts held while the
whole input is stalled."""
from __future__ import annotations

from streaming.health import statuses as S
from streaming.sinks.snapshot import HealthSnapshot

from .health_rows import ScriptedQuorum, flagged_cluster


def test_keeps_the_latest_snapshot_per_quorum():
    snap = HealthSnapshot()
    q1, rows1 = flagged_cluster("c1")
    q2 = ScriptedQuorum("c2")
    applied = snap.apply(rows1 + q2.rows(3000))
    assert snap.clusters() == ["c1", "c2"]
    [view] = snap.views("c1")
    assert view.replicas[3]["status"] == S.UNREACHABLE
    flagged = [(e.get("replica_id"), e["previous_status"], e["status"]) for e in applied.events
               if e["kind"] == "transition"]
    assert flagged == [(3, S.CAUGHT_UP, S.UNREACHABLE), (None, S.HEALTHY, S.DEGRADED)]


def test_forgotten_replica_and_quorum_vanish():
    snap = HealthSnapshot()
    q = ScriptedQuorum("c1", observers=(4,))
    snap.apply(q.rows(3000))
    assert 4 in snap.views("c1")[0].replicas
    q.script.mode[4] = "silent"
    rows = q.rows(301_000, proc_ms=2000)
    assert any(r["kind"] == "forget" and r["replica_id"] == 4 for r in rows)
    snap.apply(rows)
    assert 4 not in snap.views("c1")[0].replicas
    forget = {"kind": "forget", "cluster_id": "c1", "topic": "__cluster_metadata", "partition": 0, "seq": 99,
              "now_ms": 0, "proc_ms": 9000, "last_input_proc_ms": 2000, "silent": True, "replica_id": None}
    snap.apply([forget] + ScriptedQuorum("other").rows(1000, proc_ms=9000))
    assert snap.views("c1") == []
    assert snap.clusters() == ["other"]


def test_silent_verdicts_are_published_when_other_input_arrived_after_the_quorum_went_quiet():
    snap = HealthSnapshot()
    quiet, busy = ScriptedQuorum("quiet"), ScriptedQuorum("busy")
    snap.apply(quiet.rows(3000, proc_ms=1000) + busy.rows(3000, proc_ms=1000))
    rows = quiet.rows(4000, proc_ms=5000, silent=True) + busy.rows(4000, proc_ms=5000)
    assert snap.apply(rows).held_quorums == 0
    assert snap.views("quiet")[0].quorum["status"] == S.LEADERLESS


def test_silent_verdicts_are_held_when_no_input_at_all_arrived_since():
    snap = HealthSnapshot()
    a, b = ScriptedQuorum("a"), ScriptedQuorum("b")
    snap.apply(a.rows(3000, proc_ms=1000) + b.rows(3000, proc_ms=1000))
    applied = snap.apply(a.rows(4000, proc_ms=5000, silent=True) + b.rows(4000, proc_ms=5000, silent=True))
    assert applied.held_quorums == 2 and applied.events == []
    assert {v.quorum["status"] for v in snap.views()} == {S.HEALTHY}



def polled_every_two_batches(snap: HealthSnapshot, polled: ScriptedQuorum, nodes: ScriptedQuorum,
                             until_ms: int) -> None:
    """A collector's quorum whose snapshots land every second micro-batch, beside a quorum whose
    nodes publish in every batch; the collector's last snapshot lands a batch before the nodes'."""
    for proc_ms in range(1000, until_ms + 1, 1000):
        rows = nodes.rows(1000, proc_ms=proc_ms)
        if proc_ms % 2000 == 0 and proc_ms < until_ms:
            rows += polled.rows(2000, proc_ms=proc_ms)
        snap.apply(rows)


def test_a_slower_poller_is_held_too_when_every_publisher_stops_at_once():
    snap = HealthSnapshot()
    polled, nodes = ScriptedQuorum("polled"), ScriptedQuorum("nodes")
    polled_every_two_batches(snap, polled, nodes, until_ms=10_000)   # polled last at 8000, nodes at 10000
    applied = snap.apply(polled.rows(4000, proc_ms=14_000, silent=True) + nodes.rows(4000, proc_ms=14_000, silent=True))
    assert applied.held_quorums == 2 and applied.events == []
    assert {v.quorum["status"] for v in snap.views()} == {S.HEALTHY}


def test_a_slower_poller_that_stops_alone_is_judged_once_other_input_outlasts_its_cadence():
    snap = HealthSnapshot()
    polled, nodes = ScriptedQuorum("polled"), ScriptedQuorum("nodes")
    polled_every_two_batches(snap, polled, nodes, until_ms=10_000)
    for proc_ms in (11_000, 12_000):   # the nodes go on; polled's last input (8000) + its 2000 ms cadence is past
        snap.apply(nodes.rows(1000, proc_ms=proc_ms))
    applied = snap.apply(polled.rows(4000, proc_ms=13_000, silent=True) + nodes.rows(1000, proc_ms=13_000))
    assert applied.held_quorums == 0
    assert snap.views("polled")[0].quorum["status"] == S.LEADERLESS


def test_a_quorum_whose_last_records_land_a_batch_before_the_others_is_held_whatever_the_batch_spacing():
    # Every publisher stops at once; one quorum's partition was read just before the others'
    # last records arrived, so its last input is a batch earlier. Batches are never spaced
    # exactly a trigger apart: this last gap is a few ms longer than any gap it had seen.
    snap = HealthSnapshot()
    early, others = ScriptedQuorum("early"), ScriptedQuorum("others")
    proc_ms = 0
    for gap in (1000, 998, 999, 1000, 997):
        proc_ms += gap
        snap.apply(early.rows(gap, proc_ms=proc_ms) + others.rows(gap, proc_ms=proc_ms))
    early_last = proc_ms
    proc_ms += 1003
    snap.apply(others.rows(1003, proc_ms=proc_ms) + early.rows(1003, proc_ms=proc_ms, silent=True))
    applied = snap.apply(early.rows(4000, proc_ms=early_last + 5000, silent=True)
                         + others.rows(4000, proc_ms=early_last + 5000, silent=True))
    assert applied.held_quorums == 2 and applied.events == []
    assert {v.quorum["status"] for v in snap.views()} == {S.HEALTHY}


def test_an_outage_of_a_quorums_own_input_is_not_taken_for_its_cadence():
    snap = HealthSnapshot(max_cadence_ms=4000)
    q, other = ScriptedQuorum("q"), ScriptedQuorum("other")
    snap.apply(q.rows(1000, proc_ms=1000) + other.rows(1000, proc_ms=1000))
    for proc_ms in range(2000, 62_000, 1000):      # q's publisher away for a minute
        snap.apply(other.rows(1000, proc_ms=proc_ms))
    snap.apply(q.rows(1000, proc_ms=62_000) + other.rows(1000, proc_ms=62_000))   # back: a 61 s gap
    for proc_ms in range(63_000, 67_000, 1000):     # then q goes silent alone again
        snap.apply(other.rows(1000, proc_ms=proc_ms))
    applied = snap.apply(q.rows(5000, proc_ms=67_000, silent=True) + other.rows(1000, proc_ms=67_000))
    assert applied.held_quorums == 0   # judged after at most max_cadence_ms, not after a minute
    assert snap.views("q")[0].quorum["status"] == S.LEADERLESS


def test_replica_verdicts_reached_while_held_show_once_the_quorum_is_not_held():
    # as in the job, a replica's row comes only when what it shows changed: during the hold
    snap = HealthSnapshot()
    polled, nodes = ScriptedQuorum("polled", run_id=1), ScriptedQuorum("nodes", run_id=1)
    polled_every_two_batches(snap, polled, nodes, until_ms=10_000)   # polled last at 8000, cadence 2000
    held = snap.apply(polled.rows(4000, proc_ms=10_000, silent=True) + nodes.rows(1000, proc_ms=10_000))
    assert held.held_quorums == 1
    # held through 8000 + its 2000 ms cadence + a 1000 ms batch interval; judged after
    snap.apply(polled.rows(1000, proc_ms=11_000, silent=True) + nodes.rows(1000, proc_ms=11_000))
    snap.apply(polled.rows(1000, proc_ms=12_000, silent=True) + nodes.rows(1000, proc_ms=12_000))
    view = snap.views("polled")[0]
    assert view.quorum["status"] == S.LEADERLESS
    assert {r["status"] for r in view.replicas.values()} == {S.UNKNOWN}


def test_events_of_a_held_quorum_are_published_late_with_a_flag_not_dropped():
    # A quorum silent, then back: its consumer must see healthy -> leaderless before
    # leaderless -> healthy, and the window that closed in between.
    snap = HealthSnapshot()
    a, b = ScriptedQuorum("a"), ScriptedQuorum("b")
    snap.apply(a.rows(3000, proc_ms=1000) + b.rows(3000, proc_ms=1000))
    held = snap.apply(a.rows(4000, proc_ms=5000, silent=True) + b.rows(4000, proc_ms=5000, silent=True))
    assert held.events == []
    back = snap.apply(a.rows(1000, proc_ms=6000) + b.rows(1000, proc_ms=6000))
    quorum_a = [(e["previous_status"], e["status"], e.get("held", False)) for e in back.events
                if e["cluster_id"] == "a" and e["kind"] == "transition" and e.get("replica_id") is None]
    assert quorum_a == [(S.HEALTHY, S.LEADERLESS, True), (S.LEADERLESS, S.HEALTHY, False)]
    assert any(e["kind"] == "window" and e.get("held") for e in back.events if e["cluster_id"] == "a")
    seqs = [e["event_seq"] for e in back.events if e["cluster_id"] == "a"]
    assert seqs == sorted(seqs)


def test_replicas_not_re_emitted_keep_their_last_row():
    # Replica rows come only when what they show changed (once in full per job run): the view
    # merges them, so a steady replica stays on the dashboard between its rows.
    snap = HealthSnapshot()
    q = ScriptedQuorum("c1", observers=(4,))
    first = q.rows(3000)
    snap.apply(first)
    later = [r for r in q.rows(1000) if r["kind"] != "replica" or r["replica_id"] == 2]
    snap.apply(later)
    [view] = snap.views("c1")
    assert sorted(view.replicas) == [1, 2, 3, 4]
    assert view.replicas[2]["now_ms"] > view.replicas[3]["now_ms"]  # 2 was refreshed, 3 kept
    assert view.quorum["seq"] == max(r["seq"] for r in later)
