"""Apache Kafka's own command-line tools, run from the jars deploy/setup.sh fetched, as a
reference for the project's commands: `quorum describe` is compared with `kafka-metadata-quorum
describe`, row for row and column for column; values that move between the two calls (the high
watermark, log end offsets and lags move with Kafka's NoOps every 500 ms, timestamps with the
clock) within a stated tolerance."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from quorum import jvm

METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


def kafka_tool(main_class: str, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run one of Kafka's tools with the broker's class path; its log goes nowhere."""
    return subprocess.run([jvm.java(), "-Xmx256m", "-Dlog4j2.level=OFF", "-cp", jvm.classpath(jvm.KAFKA),
                           main_class, *args], capture_output=True, text=True, timeout=timeout_s)


def metadata_quorum(bootstrap: str, *args: str) -> str:
    """`kafka-metadata-quorum --bootstrap-server BOOTSTRAP describe ARGS`'s output."""
    out = kafka_tool(METADATA_QUORUM, "--bootstrap-server", bootstrap, "describe", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


QUORUM = [str(Path(sys.executable).parent / "quorum"), "describe"]
# between the two calls Kafka's leader appends a NoOp every 500 ms (metadata.max.idle.interval.ms);
# the two calls are a JVM start (~2 s here) apart
OFFSET_TOLERANCE = 20
TIME_TOLERANCE_MS = 10_000


def ours(bootstrap: str, *args: str) -> str:
    out = subprocess.run([*QUORUM, "--bootstrap-server", bootstrap, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def status_fields(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.strip().splitlines())}


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def assert_describe_status_matches(bootstrap: str) -> None:
    """`quorum describe --status` prints what `kafka-metadata-quorum describe --status` prints."""
    theirs = status_fields(metadata_quorum(bootstrap, "--status"))
    mine = status_fields(ours(bootstrap, "--status"))
    print("kafka-metadata-quorum:", theirs, "\nquorum describe:", mine)
    assert mine.keys() == theirs.keys()
    for key in ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters", "CurrentObservers"):
        assert mine[key] == theirs[key], key
    assert 0 <= int(mine["HighWatermark"]) - int(theirs["HighWatermark"]) <= OFFSET_TOLERANCE
    # followers' lag moves between the calls (with followers: a single node has none)
    assert abs(int(mine["MaxFollowerLag"]) - int(theirs["MaxFollowerLag"])) <= OFFSET_TOLERANCE
    assert abs(int(mine["MaxFollowerLagTimeMs"]) - int(theirs["MaxFollowerLagTimeMs"])) <= TIME_TOLERANCE_MS


def assert_describe_replication_matches(bootstrap: str) -> None:
    """`quorum describe --replication` prints what Kafka's tool prints, column for column."""
    before_ms = int(time.time() * 1000)
    theirs = table(metadata_quorum(bootstrap, "--replication"))
    mine = table(ours(bootstrap, "--replication"))
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
