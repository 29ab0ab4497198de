"""What fails a nemesis run, one rule a case: each case changes one thing in a run the judge
passes (a follower frozen for a minute, paged for and shown `unreachable`, cause `down`), and
the judge must fail it on that rule alone, or, for what the model says it may not demand, pass
it and say why. The bounds and graces are the model's (deploy/nemesis/model.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from deploy.nemesis.judge import Series, Verdict, judge, report
from deploy.nemesis.model import (CAUSE_GRACE_S, JOB_BACK_WITHIN_S, JOB_CATCH_UP_S, JOB_RESTART_WITHIN_S,
                                  STATUS_GRACE_S, UNREACHABLE_AFTER_S, BOUND_S, EVENTS_CATCH_UP_S, Done, Model)
from deploy.nemesis.runner import rule_seconds
from deploy.nemesis.schedule import Planned

CLUSTER = "local-quorum"
FOR = rule_seconds()
END = 1300
FAILURES = ("false_pages", "missed_pages", "undetected", "wrong_causes", "wrong_statuses")


def fault(index, kind, nodes, roles, start, healed, target="follower") -> Done:
    return Done(Planned(index, kind, target, 0, healed - start), CLUSTER, tuple(nodes), tuple(roles), start, healed)


def monitor(index, kind, at) -> Done:
    return Done(Planned(index, kind, kind.split("-")[0], 0, 0), None, (), (), at, at)


def seconds(a, b, value):
    return [(float(t), value) for t in range(a, b + 1)]


def alert(name, start, end, **labels):
    return ({"alertname": name, "alertstate": "firing", "cluster": CLUSTER, **labels},
            [float(t) for t in range(start, end + 1)])


@dataclass
class Run:
    """A run's faults and what Prometheus held of it."""
    faults: list[Done]
    alerts: list = field(default_factory=list)
    status: dict = field(default_factory=dict)
    causes: dict = field(default_factory=dict)
    quorum: list = field(default_factory=list)
    restarts: list = field(default_factory=list)
    batches: list = field(default_factory=list)

    def judged(self) -> Verdict:
        model = Model(self.faults, {CLUSTER: {1, 2, 3}}, {CLUSTER: {4}})
        return judge(model, Series(self.alerts, self.status, self.causes, {CLUSTER: sorted(self.quorum)},
                                   self.restarts, self.batches), FOR, END)


def frozen_follower() -> Run:
    """Follower 2 frozen for 60 s: unreachable, cause down, from 4 s in; paged at 15 s."""
    return Run([fault(0, "freeze", [2], ["follower"], 1000, 1060)],
               alerts=[alert("QuorumVoterUnreachable", 1015, 1090, replica="2")],
               status={(CLUSTER, 2): seconds(1004, 1061, "unreachable")},
               causes={(CLUSTER, 2): seconds(1004, 1061, "down")},
               quorum=seconds(1004, 1070, "degraded"))


def lost_majority() -> Run:
    """Leader 1 and follower 2 killed for 60 s: the quorum leaderless from 3 s in, paged at 20 s."""
    return Run([fault(0, "kill", [1, 2], ["leader", "follower"], 1000, 1060, target="majority")],
               alerts=[alert("QuorumLeaderless", 1020, 1100)],
               quorum=seconds(1003, 1065, "leaderless") + seconds(1066, 1100, "degraded"))


def job_batches(killed: int, back: int) -> list:
    """quorum_monitor_last_batch_timestamp_seconds as Prometheus holds it around a job killed at
    `killed`: the dead job's last batch until the new one's first, `back` seconds after the kill."""
    return [(float(t), float(killed - 1)) for t in range(killed - 30, killed + back)] + \
        [(float(t), float(t)) for t in range(killed + back, killed + back + 30)]


def killed_job(restarted_after: int = 2, back_after: int = 12) -> Run:
    """The frozen follower's run, and the job killed at 1100: its restart counted and its first
    verdict after the restart in Prometheus after the given seconds."""
    return changed(frozen_follower(), faults=frozen_follower().faults + [monitor(1, "job-kill", 1100)],
                   restarts=[(1100.0, 0.0), (1100.0 + restarted_after, 1.0)],
                   batches=job_batches(1100, back_after))


def during_outage(start: int, healed: int, shown_from: int | None) -> Run:
    """The job killed at 995 and back 12 s later (out until 995 + JOB_BACK_WITHIN_S +
    JOB_CATCH_UP_S = 1025), follower 2 frozen from start to healed, shown `unreachable` from
    shown_from and paged 15 s in."""
    shown = {} if shown_from is None else {(CLUSTER, 2): seconds(shown_from, healed + 1, "unreachable")}
    return Run([monitor(0, "job-kill", 995), fault(1, "freeze", [2], ["follower"], start, healed)],
               alerts=[alert("QuorumVoterUnreachable", start + 15, healed + 20, replica="2")],
               status=shown, causes={k: [(t, "down") for t, _ in v] for k, v in shown.items()},
               restarts=[(995.0, 0.0), (997.0, 1.0)], batches=job_batches(995, 12))


def changed(run: Run, **what) -> Run:
    for name, value in what.items():
        setattr(run, name, value)
    return run


def paging_for(a, b, status="no_majority"):
    """The frozen follower's quorum shown `status` from a to b, no alert fired for it."""
    return seconds(1004, a - 1, "degraded") + seconds(a, b, status) + seconds(b + 1, 1070, "degraded")


# (case, run, the one failure list it fills or None, what its message or the not-expected note says)
CASES: list[tuple[str, Callable[[], Run], str | None, str]] = [
    ("as it should be", frozen_follower, None, ""),
    ("a page with no fault behind it",
     lambda: changed(frozen_follower(), alerts=frozen_follower().alerts
                     + [alert("QuorumVoterUnreachable", 1015, 1090, replica="3")]),
     "false_pages", "QuorumVoterUnreachable"),
    ("a fault that outlasts its alert's threshold without the page",
     lambda: changed(frozen_follower(), alerts=[]), "missed_pages", "QuorumVoterUnreachable for voter 2"),
    ("an expected fault no verdict ever showed",
     lambda: changed(frozen_follower(), status={}), "undetected", "no verdict showed it"),
    ("an expected fault shown after its bound",
     lambda: changed(frozen_follower(), status={(CLUSTER, 2): seconds(1018, 1061, "unreachable")}),
     "undetected", "shown only after 18.0 s (bound 17 s)"),
    ("a fault shown just within its bound",
     lambda: changed(frozen_follower(), status={(CLUSTER, 2): seconds(1017, 1061, "unreachable")}), None, ""),
    ("a killed job restarted after its bound",
     lambda: killed_job(restarted_after=8), "undetected", "#1 job-kill monitor [] for 0 s: shown only after 8.0 s"),
    ("a killed job restarted and back with a verdict within their bounds", killed_job, None, ""),
    ("a killed job back with a verdict after its bound",
     lambda: killed_job(back_after=21), "undetected", "#1 job-kill monitor []: back with a verdict only after 21.0 s"),
    ("a killed job back with a verdict just within its bound", lambda: killed_job(back_after=20), None, ""),
    ("a killed job restarted that never completes a batch",
     lambda: changed(killed_job(), batches=[(float(t), 1099.0) for t in range(1070, END)]),
     "undetected", "#1 job-kill monitor []: no verdict after its restart"),
    ("a follower frozen and then the leader: the quorum's status is the verdict on both",
     lambda: Run([fault(0, "freeze", [3], ["follower"], 1000, 1040), fault(1, "freeze", [1], ["leader"], 1004, 1060,
                                                                         target="leader")],
                 alerts=[alert("QuorumLeaderless", 1025, 1070)],
                 status={(CLUSTER, r): seconds(1008, 1045, "unknown") for r in (1, 2, 3)},
                 quorum=seconds(1002, 1007, "degraded") + seconds(1008, 1045, "leaderless")), None, ""),
    ("a fault shorter than its detection bound needs no verdict",
     lambda: Run([fault(0, "freeze", [2], ["follower"], 1000, 1012)]), None, "less than its detection bound of 17 s"),
    ("a fault over within its bound of the monitor's outage needs no verdict",
     lambda: during_outage(1000, 1041, shown_from=None), None,
     "the monitor was out: #0 job-kill 5 s before it began (out until 30 s after it began)"),
    ("a fault still out its bound past the monitor's outage needs a verdict within its bound of it",
     lambda: during_outage(1000, 1060, shown_from=None), "undetected",
     "#1 freeze local-quorum [2] for 60 s: no verdict showed it (bound 42 s)"),
    ("a fault from the monitor's outage shown within its bound of the outage's end",
     lambda: during_outage(1000, 1060, shown_from=1025 + 17), None, ""),
    ("a fault right after the monitor's outage needs a verdict in time",
     lambda: during_outage(1026, 1086, shown_from=1026 + 18), "undetected",
     "#1 freeze local-quorum [2] for 60 s: shown only after 18.0 s (bound 17 s)"),
    ("a fault right after the monitor's outage shown in time",
     lambda: during_outage(1026, 1086, shown_from=1026 + 17), None, ""),
    ("a skewed clock has nothing to detect",
     lambda: Run([fault(0, "skew", [2], ["follower"], 1000, 1060)]), None, "nothing to detect"),
    ("a wrong cause held beyond its grace",
     lambda: changed(frozen_follower(), causes={(CLUSTER, 2): seconds(1004, 1011, "unknown")
                                                + seconds(1012, 1061, "down")}),
     "wrong_causes", "cause unknown for 8 s from 1004 (grace 5 s); #0 freeze local-quorum [2] says down"),
    ("a wrong cause within its grace",
     lambda: changed(frozen_follower(), causes={(CLUSTER, 2): seconds(1004, 1008, "partitioned")
                                                + seconds(1009, 1061, "down")}), None, ""),
    ("a cut-off node shown down",
     lambda: changed(frozen_follower(), faults=[fault(0, "cutoff", [2], ["follower"], 1000, 1060)]),
     "wrong_causes", "cause down for 56 s"),
    ("a paging status no fault allows, no alert fired",
     lambda: changed(frozen_follower(), quorum=paging_for(1010, 1021)),
     "wrong_statuses", "local-quorum no_majority for 12 s from 1010 (grace 8 s) with voters out [2]"),
    ("a paging status no fault allows, within its grace",
     lambda: changed(frozen_follower(), quorum=paging_for(1010, 1017)), None, ""),
    ("unobserved no fault allows",
     lambda: changed(frozen_follower(), quorum=paging_for(1010, 1020, "unobserved")),
     "wrong_statuses", "unobserved for 11 s"),
    ("a lost majority leaderless while two voters are out and recovering", lost_majority, None, ""),
    ("a split brain, two voters out or not",
     lambda: changed(lost_majority(), quorum=seconds(1003, 1029, "leaderless") + seconds(1030, 1040, "split_brain")
                     + seconds(1041, 1065, "leaderless")),
     "wrong_statuses", "split_brain for 11 s from 1030"),
    ("a lost majority still paging past its recovery and grace",
     lambda: changed(lost_majority(), quorum=seconds(1003, 1090, "leaderless")),
     "wrong_statuses", "leaderless for 10 s from 1081"),
]


@pytest.mark.parametrize("name,make,failure,says", CASES, ids=[c[0] for c in CASES])
def test_a_run_fails_on_each_rule_alone_and_passes_what_the_model_may_not_demand(name, make, failure, says):
    verdict = make().judged()
    lines = report(verdict, 0, 5)
    print("\n".join(lines))
    filled = [f for f in FAILURES if getattr(verdict, f)]
    assert filled == ([failure] if failure else []), lines
    assert verdict.failed == (failure is not None)
    if failure:
        found = getattr(verdict, failure)
        text = "\n".join(f"{ep.alert} {why}" for ep, why in found) if failure == "false_pages" else "\n".join(found)
        assert says in text, text
        assert len(found) == 1
    elif says:
        assert says in "\n".join(verdict.not_expected), verdict.not_expected


def test_the_last_line_counts_each_failure_and_the_seconds_beyond_grace():
    run = frozen_follower()
    run.causes = {(CLUSTER, 2): seconds(1004, 1013, "partitioned") + seconds(1014, 1061, "down")}
    run.quorum = paging_for(1010, 1025)
    last = report(run.judged(), 2026, 4)[-1]
    assert last == ("nemesis: 1 faults, 1 detected, 0 false pages, 0 missed pages, 0 undetected or late, "
                    f"1 wrong causes ({10 - CAUSE_GRACE_S:.0f} s beyond grace), 1 wrong paging statuses "
                    f"({16 - STATUS_GRACE_S:.0f} s beyond grace), detection p99 4.0 s (seed 2026, 4 min)")


def test_the_bounds_are_the_ones_the_docs_state():
    """docs/reliability.md states these figures; a change to one changes the docs."""
    assert (UNREACHABLE_AFTER_S + BOUND_S, JOB_RESTART_WITHIN_S, JOB_BACK_WITHIN_S, JOB_CATCH_UP_S,
            EVENTS_CATCH_UP_S, CAUSE_GRACE_S, STATUS_GRACE_S) == (17, 5, 20, 10, 60, 5, 8)


def test_the_report_prints_each_killed_jobs_time_back():
    lines = report(killed_job(back_after=13).judged(), 2026, 4)
    assert "job back: #1 job-kill monitor []: first verdict after 13.0 s (bound 20 s)" in lines, lines
