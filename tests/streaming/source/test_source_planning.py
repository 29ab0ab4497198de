"""Offset planning and option parsing: pure, no broker."""
from __future__ import annotations

import os
import random

import pytest

from streaming.source.options import KafkaSourceOptions, SourceOptionError
from streaming.source.planning import (OffsetRange, cap_to_limit, group_ranges, make_offset, positions_of,
                                       ranges_between)


def test_offsets_list_partitions_in_numeric_order_so_equal_offsets_have_equal_json():
    assert list(make_offset("t", {10: 5, 2: 7, 0: 1})["partitions"]) == ["0", "2", "10"]


def test_offset_of_another_topic_is_refused_naming_both_topics():
    with pytest.raises(ValueError, match="'old'.*'new'"):
        positions_of(make_offset("old", {0: 1}), "new")


def test_no_limit_reads_everything_available():
    assert cap_to_limit({0: 5, 1: 0}, {0: 10, 1: 3}, None) == {0: 10, 1: 3}


def test_limit_is_shared_in_proportion_to_what_each_partition_has_waiting():
    assert cap_to_limit({0: 0, 1: 0}, {0: 300, 1: 100}, 100) == {0: 75, 1: 25}


def test_a_partition_with_a_single_waiting_record_is_not_starved_by_a_busy_one():
    ends = cap_to_limit({0: 0, 1: 0}, {0: 1_000_000, 1: 1}, 10)
    assert ends[1] == 1 and sum(ends.values()) == 10


def test_ends_never_go_backwards_when_a_watermark_is_behind_the_start():
    assert cap_to_limit({0: 50}, {0: 40}, 10) == {0: 50}


def test_limited_plans_read_every_record_once_in_random_cases():
    seed = random.randrange(2 ** 32)
    print(f"seed={seed}")
    rnd = random.Random(seed)
    for _ in range(300):
        parts = rnd.randint(1, 6)
        start = {p: rnd.randint(0, 50) for p in range(parts)}
        high = {p: start[p] + rnd.choice([0, 1, 2, rnd.randint(0, 500)]) for p in range(parts)}
        limit = rnd.randint(1, 300)
        pos, batches = dict(start), 0
        while pos != high:
            ends = cap_to_limit(pos, high, limit)
            taken = sum(ends[p] - pos[p] for p in pos)
            assert 0 < taken <= limit, (seed, pos, high, limit)
            assert all(pos[p] <= ends[p] <= high[p] for p in pos)
            pos, batches = ends, batches + 1
        assert batches <= sum(high[p] - start[p] for p in high) // limit + parts + 1


def test_small_ranges_share_a_read_task_and_a_large_one_has_its_own():
    r = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 20), OffsetRange("t", 2, 0, 5000),
         OffsetRange("t", 3, 7, 8)]
    assert group_ranges(r, task_records=1000) == [r[:2], [r[2]], [r[3]]]
    assert group_ranges(r[:2] + r[3:], task_records=1000) == [r[:2] + r[3:]]  # a quiet topic: one task
    assert group_ranges([], task_records=1000) == []


def test_a_busy_batch_is_spread_over_the_tasks_that_can_run_at_once_a_quiet_one_is_not():
    busy = [OffsetRange("t", p, 0, 2500) for p in range(4)]
    assert group_ranges(busy, min_tasks=2) == [busy[:2], busy[2:]]
    assert group_ranges(busy, min_tasks=8) == [[r] for r in busy]  # never more tasks than ranges
    quiet = [OffsetRange("t", p, 0, 900) for p in range(4)]
    assert group_ranges(quiet, min_tasks=2) == [quiet]  # 3,600 records: one task's fixed cost is less
    lopsided = [OffsetRange("t", 0, 0, 9000), OffsetRange("t", 1, 0, 500), OffsetRange("t", 2, 0, 500)]
    assert group_ranges(lopsided, min_tasks=2) == [lopsided[:1], lopsided[1:]]


def test_grouped_tasks_read_every_range_once_in_order_in_random_cases():
    seed = int(os.environ.get("PLANNING_SEED", random.randrange(2 ** 32)))
    print(f"seed={seed} (PLANNING_SEED={seed} replays it)")
    rnd = random.Random(seed)
    for _ in range(300):
        ranges = [OffsetRange("t", p, 0, rnd.choice([1, 5, rnd.randint(1, 3000)])) for p in range(rnd.randint(1, 12))]
        limit = rnd.randint(1, 2000)
        tasks = group_ranges(ranges, task_records=limit)
        assert [rng for task in tasks for rng in task] == ranges, seed
        assert all(task for task in tasks), seed
        assert all(len(task) == 1 or sum(rng.size for rng in task) <= limit for task in tasks), seed
        # no two neighbouring tasks could have been one
        assert all(sum(rng.size for rng in a + b) > limit for a, b in zip(tasks, tasks[1:])), seed
        min_tasks = rnd.randint(1, 8)
        spread = group_ranges(ranges, task_records=limit, min_tasks=min_tasks)
        assert [rng for task in spread for rng in task] == ranges, seed
        assert all(task for task in spread) and len(spread) >= len(tasks), seed
        assert all(len(task) == 1 or sum(rng.size for rng in task) <= limit for task in spread), seed


def test_ranges_skip_empty_partitions_and_read_new_partitions_from_their_earliest_offset():
    assert ranges_between("t", {0: 5, 1: 9}, {0: 8, 1: 9, 2: 4}, {2: 1}) == [
        OffsetRange("t", 0, 5, 8), OffsetRange("t", 2, 1, 4)]


def test_options_use_the_native_kafka_names_and_pass_security_settings_through():
    o = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:9092", "subscribe": "events",
                                  "startingOffsets": "earliest", "maxOffsetsPerTrigger": "500",
                                  "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                                  "kafka.ssl.ca.location": "/ca.pem"})
    assert (o.topic, o.starting_offsets, o.max_offsets_per_trigger) == ("events", "earliest", 500)
    conf = o.consumer_config()
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "PLAIN"
    assert conf["ssl.ca.location"] == "/ca.pem" and conf["bootstrap.servers"] == "h:9092"


@pytest.mark.parametrize("options, named", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, "subscribe"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b"}, "subscribe"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": "middle"}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.group.id": "g"}, "kafka.group.id"),
])
def test_a_bad_option_is_refused_naming_it(options, named):
    with pytest.raises(SourceOptionError, match=named.replace(".", r"\.")):
        KafkaSourceOptions.parse(options)
