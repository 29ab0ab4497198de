"""The nemesis: a seeded schedule of overlapping faults run on the whole local stack (a real Kafka
KRaft quorum watched by `quorum collect`, the project's quorum of node processes, the events
Kafka, the supervised streaming job, Prometheus with the alert rules), and every alert and verdict
judged against what the schedule alone says should happen. `deploy/run-local nemesis --help`."""
