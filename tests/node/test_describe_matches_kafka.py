"""`quorum describe` against real Apache Kafka KRaft quorums (the session's broker+controller
node, and the session's cluster of three controllers and a broker) prints what Kafka's own
`kafka-metadata-quorum describe` prints, row for row and column for column; values that move
between the two calls (the high watermark, log end offsets and lags move with Kafka's NoOps every
500 ms, timestamps with the clock) within a stated tolerance."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_tools import metadata_quorum

QUORUM = [str(Path(sys.executable).parent / "quorum"), "describe"]
# between the two calls Kafka's leader appends a NoOp every 500 ms (metadata.max.idle.interval.ms);
# the two calls are a JVM start (~2 s here) apart
OFFSET_TOLERANCE = 20
TIME_TOLERANCE_MS = 10_000


@pytest.fixture(params=["broker", "kafka_cluster"])
def kafka(request):
    """A real Kafka to describe: one combined node, or three controllers and a broker."""
    return request.getfixturevalue(request.param)


def ours(bootstrap: str, *args: str) -> str:
    out = subprocess.run([*QUORUM, "--bootstrap-server", bootstrap, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def status_fields(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.strip().splitlines())}


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_status_matches_kafkas_tool(kafka):
    theirs = status_fields(metadata_quorum(kafka.bootstrap, "--status"))
    mine = status_fields(ours(kafka.bootstrap, "--status"))
    print("kafka-metadata-quorum:", theirs, "\nquorum describe:", mine)
    assert mine.keys() == theirs.keys()
    for key in ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters", "CurrentObservers"):
        assert mine[key] == theirs[key], key
    assert 0 <= int(mine["HighWatermark"]) - int(theirs["HighWatermark"]) <= OFFSET_TOLERANCE
    # followers' lag moves between the calls (with followers: a single node has none)
    assert abs(int(mine["MaxFollowerLag"]) - int(theirs["MaxFollowerLag"])) <= OFFSET_TOLERANCE
    assert abs(int(mine["MaxFollowerLagTimeMs"]) - int(theirs["MaxFollowerLagTimeMs"])) <= TIME_TOLERANCE_MS


def test_replication_matches_kafkas_tool(kafka):
    before_ms = int(time.time() * 1000)
    theirs = table(metadata_quorum(kafka.bootstrap, "--replication"))
    mine = table(ours(kafka.bootstrap, "--replication"))
    print("kafka-metadata-quorum:", theirs, "\nquorum describe:", mine)
    assert mine[0] == theirs[0]   # the header
    header = theirs[0]
    assert len(mine) == len(theirs)
    for row_mine, row_theirs in zip(mine[1:], theirs[1:]):
        mine_row, theirs_row = dict(zip(header, row_mine)), dict(zip(header, row_theirs))
        for column in ("NodeId", "DirectoryId", "Status"):
            assert mine_row[column] == theirs_row[column], column
        assert abs(int(mine_row["Lag"]) - int(theirs_row["Lag"])) <= OFFSET_TOLERANCE
        assert 0 <= int(mine_row["LogEndOffset"]) - int(theirs_row["LogEndOffset"]) <= OFFSET_TOLERANCE
        for column in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
            assert abs(int(mine_row[column]) - int(theirs_row[column])) <= TIME_TOLERANCE_MS, column
            assert int(theirs_row[column]) <= before_ms + TIME_TOLERANCE_MS
