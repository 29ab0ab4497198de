"""The health processor freezes its Python worker's heap once, so PySpark's collect after every
task does not walk the worker's imports again (see `processor.freeze_worker_heap`).

Each test runs in an interpreter of its own: freezing is for the life of a process."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def run_in_fresh_interpreter(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_processor_opening_its_state_freezes_the_worker_heap_once_and_new_garbage_is_still_collected():
    out = run_in_fresh_interpreter("""
        import gc
        from pyspark.sql.streaming.tws_tester import TwsTester
        from streaming.health.config import HealthConfig
        from streaming.health.processor import QuorumHealthRowProcessor

        assert gc.get_freeze_count() == 0
        alive = len(gc.get_objects())
        TwsTester(QuorumHealthRowProcessor(HealthConfig()), timeMode="ProcessingTime", outputMode="Update")
        frozen = gc.get_freeze_count()
        # what a collect still walks: only what was made after the freeze
        walked = len(gc.get_objects())
        # a second task's processor opens its state: nothing more is frozen
        TwsTester(QuorumHealthRowProcessor(HealthConfig()), timeMode="ProcessingTime", outputMode="Update")
        again = gc.get_freeze_count()
        # a reference cycle made after the freeze is garbage the collector still finds
        cycle = []
        cycle.append(cycle)
        del cycle
        found = gc.collect()
        print(alive, frozen, walked, again, found)
    """)
    alive, frozen, walked, again, found = map(int, out.split())
    # PySpark, pandas, pyarrow and the job's modules, less what was garbage already
    assert frozen > alive / 2 > 5_000, out
    assert walked < frozen / 10, out
    assert again == frozen, out
    assert found >= 1, out
