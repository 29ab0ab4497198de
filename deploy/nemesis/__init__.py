"""The nemesis: a seeded schedule of overlapping faults run on the whole local stack (a real Kafka
KRaft quorum watched by `quorum collect`, the project's quorum of node processes, the events
Kafka, the supervised streaming job, Prometheus with the alert rules), and every alert and verdict
judged against what the schedule alone says should happen. `deploy/run-local nemesis --help`."""

import sys
from pathlib import Path

# the nemesis drives the stack through the modules beside it (deploy/stack_control.py,
# deploy/stack_faults.py), imported by plain name as deploy/local_stack.py imports them
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
