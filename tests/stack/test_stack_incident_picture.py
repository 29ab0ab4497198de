"""The incident picture (deploy/incident_picture.py) drawn from the shared stack: a follower cut
off until QuorumVoterUnreachable fires, healed until it resolves, plotted from Prometheus' range
queries. The data must show what the picture claims: the replica unreachable with cause
partitioned, the alert pending, firing and gone, the quorum healthy again."""
from __future__ import annotations

import itertools

from deploy.incident_picture import plot, run_incident, spans


def test_the_incident_picture_shows_a_cut_off_voter_firing_and_resolving(stack, tmp_path):
    run_dir, state = stack
    incident = run_incident(run_dir, state["urls"]["prometheus"])
    print(f"node {incident.replica}: alert firing {incident.fired - incident.cut:.1f} s after the cut, "
          f"resolved {incident.resolved - incident.healed:.1f} s after the heal")
    replica = str(incident.replica)
    statuses = [s for _, _, s in spans(incident.series["replica"], "status")[replica]]
    assert statuses[0] == "caught_up" and "unreachable" in statuses and statuses[-1] == "caught_up", statuses
    assert "partitioned" in {c for _, _, c in spans(incident.series["cause"], "cause")[replica]}
    # a rule evaluation that came late leaves a gap in the range query, not a change of state
    runs = spans(incident.series["alert"], "alertstate")[replica]
    alert = [state for state, _ in itertools.groupby(s for _, _, s in runs)]
    assert alert == ["pending", "firing"], alert
    assert spans(incident.series["quorum"], "status", key="cluster")["local-quorum"][-1][2] == "healthy"
    picture = plot(incident, tmp_path / "incident.png")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000
