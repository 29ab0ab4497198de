"""The nemesis on the shared stack (secured Kafka, the project's quorum, a real Kafka KRaft quorum
watched by `quorum collect`): a fixed seed's four minutes of overlapping faults, every alert and
verdict judged against the schedule: no false page, no missed page, every fault the model
expects detected within its bound, no wrong cause or paging status held beyond its grace.
About 5 minutes in all; longer runs: `deploy/run-local nemesis --minutes 30` (docs/reliability.md)."""
from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

SEED = 2026
MINUTES = 4


def test_a_seeded_nemesis_pages_for_every_fault_that_deserves_it_and_for_nothing_else(stack, tmp_path):
    run_dir, _state = stack
    report = tmp_path / "nemesis.json"
    out = subprocess.run([sys.executable, str(ROOT / "deploy" / "local_stack.py"), "--run-dir", str(run_dir),
                          "nemesis", "--attach", "--seed", str(SEED), "--minutes", str(MINUTES),
                          "--report", str(report)], capture_output=True, text=True, timeout=MINUTES * 60 + 600)
    print(out.stdout[-12000:], out.stderr[-3000:])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("nemesis: ") and (" 0 false pages, 0 missed pages, 0 undetected or late, 0 wrong causes "
                                             "(0 s beyond grace), 0 wrong paging statuses (0 s beyond grace)") in last, last
    faults = json.loads(report.read_text())["faults"]
    assert len(faults) >= 8, faults
    assert {f["cluster"] for f in faults} >= {"local-quorum", _state["kafka_quorum"]["cluster_id"]}
