"""The health stage's parts benchmark runs against today's tracker: its cut runs replace parts of
`QuorumTracker` by name, so a renamed or re-shaped part fails here rather than in a benchmark
run. Each cut leaves less work than the whole and puts the tracker back after."""
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from health_stage_parts import MODES, batches, measure, without  # noqa: E402

from streaming.health.config import HealthConfig  # noqa: E402
from streaming.health.tracker import QuorumTracker  # noqa: E402


def test_each_cut_emits_no_more_than_the_whole_and_the_tracker_is_put_back():
    evaluate, apply_all = QuorumTracker._evaluate, QuorumTracker.apply_all
    work = batches(quorums=8, buckets=2, seconds=6)
    rows = {mode: measure(mode, work, warm=3, cfg=HealthConfig())[1] for mode in MODES}
    assert rows["whole"] > 0
    assert rows["one evaluation a batch"] > 0  # the closing evaluation still emits
    assert rows["no evaluation"] == rows["state and records only"] == 0
    assert (QuorumTracker._evaluate, QuorumTracker.apply_all) == (evaluate, apply_all)


def test_a_cut_is_undone_when_the_run_fails():
    evaluate = QuorumTracker._evaluate
    try:
        with without("no evaluation"):
            assert QuorumTracker._evaluate is not evaluate
            raise RuntimeError
    except RuntimeError:
        pass
    assert QuorumTracker._evaluate is evaluate
