"""Decoding's rejects of each micro-batch, as one JSON-lines file per batch under `dead_letters.path`.

The file is named after the batch (`batch-<id>.json`), so a batch replayed after a restart
rewrites the same file and every reject is kept once. Each line is one reject as
`streaming.health.raw_records` writes it: reason, field, record type, the raw value and key in
base64, topic, partition, offset, Kafka timestamp and when it was rejected.

A plain path is written by this process (the driver), through a temporary file renamed into
place; a path with a scheme (`hdfs://`, `s3a://`, `file://`) goes through Hadoop's FileSystem in
the driver's JVM, as the checkpoint does, so shared storage works in cluster mode.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from streaming.checkpoint_files import write_bytes
from streaming.spark_session import is_local_path, skip_local_checksums

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def batch_file_name(batch_id: int) -> str:
    return f"batch-{batch_id:012d}.json"


class DeadLetterFiles:
    def __init__(self, path: str):
        self.path = path.rstrip("/")

    def write(self, batch_id: int, lines: list[str], spark=None) -> None:
        """Write one batch's rejects (`lines`, JSON texts); nothing when there are none.
        `spark`: the session whose JVM writes a path with a scheme."""
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        name = batch_file_name(batch_id)
        if _SCHEME.match(self.path):
            if spark is None:
                raise ValueError(f"dead_letters.path {self.path} needs Spark's Hadoop file system")
            _write_hadoop(spark, f"{self.path}/{name}", data)
        else:
            _write_local(Path(self.path) / name, data)


def _write_local(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)


def _write_hadoop(spark, target: str, data: bytes) -> None:
    if is_local_path(target):
        skip_local_checksums(spark)  # no .crc files next to the lines
    write_bytes(spark, target, data)  # overwrite: a replayed batch replaces its own file
