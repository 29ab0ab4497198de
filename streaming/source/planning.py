"""Offset planning, pure: the offset format in Spark's checkpoint and how a read limit is shared.

An offset is `{"topic": name, "partitions": {"0": next_offset, ...}}`: for each Kafka partition
the first offset *not yet* read. A micro-batch reads `[start[p], end[p])` of every partition.
Partitions are always listed in numeric order so that equal offsets have equal JSON (Spark
compares the JSON to decide whether there is new data).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # first offset read
    end: int    # first offset not read

    @property
    def size(self) -> int:
        return self.end - self.start


def make_offset(topic: str, positions: Mapping[int, int]) -> dict:
    return {"topic": topic, "partitions": {str(p): int(positions[p]) for p in sorted(positions)}}


def positions_of(offset: Mapping | None, topic: str) -> dict[int, int]:
    """The per-partition positions of an offset written by `make_offset`."""
    if not offset:
        return {}
    if offset.get("topic") != topic:
        raise ValueError(f"checkpointed offset is for topic {offset.get('topic')!r}, the source reads {topic!r}: "
                         "use a new checkpoint location when changing the topic")
    return {int(p): int(o) for p, o in offset.get("partitions", {}).items()}


def cap_to_limit(start: Mapping[int, int], available: Mapping[int, int], max_records: int | None) -> dict[int, int]:
    """End positions that read at most `max_records` in total, shared in proportion to what each
    partition has waiting (like Spark's own Kafka source), never going backwards. Every partition
    that has records gets at least one while the budget lasts, so none is starved. `start` must
    hold every partition of `available`."""
    ends = {p: max(available[p], start[p]) for p in sorted(available)}
    if max_records is None:
        return ends
    waiting = {p: ends[p] - start[p] for p in ends}
    total = sum(waiting.values())
    if total <= max_records:
        return ends
    take = {p: (n * max_records) // total for p, n in waiting.items()}
    budget = max_records - sum(take.values())
    # Hand out the rounding remainder one record at a time: partitions that got nothing first,
    # then those with the most left.
    for p in sorted(waiting, key=lambda q: (take[q] > 0, -(waiting[q] - take[q]), q)):
        if budget == 0:
            break
        if take[p] < waiting[p]:
            take[p] += 1
            budget -= 1
    return {p: start[p] + take[p] for p in ends}


def ranges_between(topic: str, start: Mapping[int, int], end: Mapping[int, int],
                   new_partition_start: Mapping[int, int] | None = None) -> list[OffsetRange]:
    """The non-empty ranges of one micro-batch. A partition absent from `start` (created since)
    is read from `new_partition_start` (its earliest offset)."""
    out = []
    for p in sorted(end):
        first = start[p] if p in start else (new_partition_start or {}).get(p, 0)
        if end[p] > first:
            out.append(OffsetRange(topic, p, first, end[p]))
    return out


# Records one read task takes at most when ranges are put together. Each task of a micro-batch
# costs a fixed amount (the decoding's code generated for it, a Python worker's round trip):
# measured on local[2] at 379 events/s, four tasks a batch instead of one added 190 ms to every
# batch and 0.35 of a core. Small batches therefore go in one task; a large one (a backlog, a
# busy topic) is still spread over several tasks.
TASK_RECORDS = 20_000
# A busy batch is spread over at least `min_tasks` tasks (the cores that can read at once) once
# each would get this many records: below it a task's fixed cost outweighs the parallel reading.
# Measured on local[2] at 3,000 events/s: a batch of 9,000 records read and decoded in one task
# took 590 ms, the whole stage's time while the other core waited.
SPLIT_RECORDS = 2_000


def group_ranges(ranges: list[OffsetRange], task_records: int = TASK_RECORDS,
                 min_tasks: int = 1) -> list[list[OffsetRange]]:
    """The ranges put together into tasks of at most `task_records` records (a larger range is a
    task of its own), in order; every range in exactly one task. Then, while there are fewer
    than `min_tasks` tasks and the largest task with several ranges holds at least 2 x
    `SPLIT_RECORDS`, that task is cut in two where its records halve."""
    tasks: list[list[OffsetRange]] = []
    size = 0
    for rng in ranges:
        if not tasks or size + rng.size > task_records:
            tasks.append([])
            size = 0
        tasks[-1].append(rng)
        size += rng.size
    while len(tasks) < min_tasks:
        splittable = [i for i, t in enumerate(tasks) if len(t) > 1 and _records(t) >= 2 * SPLIT_RECORDS]
        if not splittable:
            break
        i = max(splittable, key=lambda j: _records(tasks[j]))
        tasks[i:i + 1] = _halves(tasks[i])
    return tasks


def _records(task: list[OffsetRange]) -> int:
    return sum(rng.size for rng in task)


def _halves(task: list[OffsetRange]) -> list[list[OffsetRange]]:
    """The task cut between two ranges where the two sides' records are closest to equal."""
    total, before, best = _records(task), 0, (None, 1)
    for cut in range(1, len(task)):
        before += task[cut - 1].size
        if best[0] is None or abs(total - 2 * before) < best[0]:
            best = (abs(total - 2 * before), cut)
    return [task[:best[1]], task[best[1]:]]
