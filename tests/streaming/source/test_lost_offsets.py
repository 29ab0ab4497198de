"""Counting the offsets a micro-batch planned but found deleted, from its progress."""
import json

from streaming.source import lost_offsets


def progress(start, end, rows):
    return {"startOffset": json.dumps(start) if start is not None else None,
            "endOffset": json.dumps(end), "numInputRows": rows}


def test_a_batch_that_read_all_it_planned_lost_nothing():
    assert lost_offsets(progress({"t": {"0": 10, "1": 5}}, {"t": {"0": 20, "1": 9}}, 14)) == 0


def test_planned_offsets_not_read_are_lost():
    assert lost_offsets(progress({"t": {"0": 10, "1": 5}}, {"t": {"0": 20, "1": 9}}, 4)) == 10


def test_a_first_batch_without_a_start_counts_nothing():
    assert lost_offsets(progress(None, {"t": {"0": 20}}, 0)) == 0


def test_a_partition_new_to_the_batch_counts_from_offset_zero():
    assert lost_offsets(progress({"t": {"0": 10}}, {"t": {"0": 10, "1": 8}}, 5)) == 3


def test_offsets_as_parsed_json_are_read_too():
    assert lost_offsets({"startOffset": {"t": {"0": 1}}, "endOffset": {"t": {"0": 4}}, "numInputRows": 1}) == 2
