"""The real-Kafka test matrix (quorum/local_kafka/kafka_shapes.py): every id parses and names itself again,
CI's subset covers both topologies and both voter sets on two Kafka lines, QUORUM_KAFKA_MATRIX
selects by name, and deploy/setup.sh is told to fetch exactly the versions a selection runs."""
from __future__ import annotations

import pytest

from quorum import jvm
from quorum.local_kafka.kafka_shapes import (CI_IDS, FULL_IDS, ShapeError, ci, extra_versions, full, parse,
                                             profiles_to_fetch, selected)


@pytest.mark.parametrize("text", FULL_IDS + CI_IDS)
def test_every_id_of_the_matrix_parses_to_a_pinned_version_and_names_itself_again(text):
    shape = parse(text)
    assert shape.version in jvm.kafka_versions()
    assert parse(shape.id) == shape and shape.id.startswith(shape.version + "-")


def test_the_full_matrix_is_the_documented_one():
    assert [s.id for s in full()] == [
        "4.4.0-dedicated-dynamic", "4.4.0-combined-static", "4.4.0-combined-dynamic", "4.4.0-dedicated-static",
        "4.3.2-dedicated-dynamic", "4.3.2-combined-static", "4.2.2-dedicated-dynamic", "4.2.2-combined-static",
        "4.1.2-dedicated-dynamic", "4.1.2-combined-static", "4.0.2-dedicated-dynamic", "4.0.2-combined-static",
        "3.9.1-dedicated-dynamic", "3.9.1-combined-static",
        "3.7.2-combined-static", "3.7.2-dedicated-static"]


def test_ci_runs_a_4x_and_a_3x_line_both_topologies_and_both_voter_sets_all_in_the_full_matrix():
    shapes = ci()
    assert [s.id for s in shapes] == ["4.3.2-dedicated-dynamic", "3.9.1-combined-static"]
    assert set(shapes) <= set(full())
    assert {jvm.kafka_major(s.version) for s in shapes} == {4, 3}
    assert {s.combined for s in shapes} == {True, False} and {s.dynamic for s in shapes} == {True, False}


def test_the_selection_is_ci_by_default_full_when_asked_or_the_named_shapes():
    assert selected("") == selected("ci") == ci()
    assert selected("full") == full()
    named = selected("4.4.0-combined-static, 3.7.2-dedicated-static")
    assert [(s.version, s.combined, s.dynamic) for s in named] == [("4.4.0", True, False), ("3.7.2", False, False)]


@pytest.mark.parametrize("text, says", [
    ("3.7.2-dedicated-dynamic", "static voter sets only"),
    ("3.8.0-combined-static", "no Kafka 3.8.0 pinned"),
    ("4.4.0-mixed-static", "topology 'mixed'"),
    ("4.4.0-combined-elastic", "voter set 'elastic'"),
    ("4.4.0", "VERSION-TOPOLOGY-VOTERS"),
])
def test_a_shape_kafka_cannot_run_or_a_typo_is_refused_by_name(text, says):
    with pytest.raises(ShapeError, match=says):
        parse(text)


def test_setup_fetches_the_default_kafka_and_the_versions_the_selection_runs(monkeypatch):
    monkeypatch.delenv("QUORUM_KAFKA_VERSIONS", raising=False)
    monkeypatch.delenv("QUORUM_KAFKA_MATRIX", raising=False)
    assert profiles_to_fetch() == ["kafka", "kafka-3.9", "kafka-4.3"]
    monkeypatch.setenv("QUORUM_KAFKA_MATRIX", "3.7.2-dedicated-static")
    assert profiles_to_fetch() == ["kafka", "kafka-3.7"]
    monkeypatch.setenv("QUORUM_KAFKA_MATRIX", "full")
    assert profiles_to_fetch() == ["kafka", "kafka-3.7", "kafka-3.9", "kafka-4.0", "kafka-4.1", "kafka-4.2",
                                   "kafka-4.3"]


def test_extra_versions_are_named_by_version_or_line_or_all():
    assert extra_versions("4.0 3.7.2") == ["4.0.2", "3.7.2"]
    assert extra_versions("3.9.1,4.4.0") == ["3.9.1", "4.4.0"]
    assert extra_versions("all") == sorted(jvm.kafka_versions())
    with pytest.raises(ShapeError, match="no Kafka 2.8"):
        extra_versions("2.8")
