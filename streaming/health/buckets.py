"""Several quorums under one state key: the health state's layout for a new checkpoint.

Each state key is a bucket, `pmod(xxhash64(cluster_id, topic, partition), buckets)`, and its one
value holds every quorum of the bucket, each kept as `processor` keeps a quorum. Every call on a
state variable is a round trip to the JVM's state server, and a profile of a busy job found each
quorum paying five a batch (the key, get, update and its timer's two) and most of the health
stage's time waiting on them. A bucket pays those five once for all its quorums.

Timers: each quorum keeps its due time (`timer_ms` in its state) as with one quorum per key, and
the bucket has one processing-time timer, due when its earliest quorum is. A due quorum is
evaluated when that timer fires, or with its bucket's input when it sent nothing itself, at the
instant its own timer would have fired; a quorum that sends in every batch is evaluated once per
batch, with its input. The rows are those of one quorum per key (test_health_buckets.py).

Quorum rows (`news`): with `health.quorum_row_refresh_ms`, a quorum row that shows nothing new is
left out until the refresh falls due, and the bucket's value keeps what each quorum's last row
showed (`shown`; a value saved before has none, and its quorums' next rows all come). Its events
and replica rows are never left out, and a batch with input brings one quorum row of its bucket.

The number of buckets is fixed for the life of a checkpoint (a quorum must always hash to the
bucket that holds its state): `streaming.state_layout` chooses it for a new checkpoint and reads
it back on a restart.

Pandas, not rows (`BUCKETED_HEALTH_API`): a bucket gets hundreds to thousands of records a batch,
and PySpark hands a row-based processor its input one cell at a time, an Arrow scalar made and
converted for each (the bucket's key again for every row): in a profile of the job at 10,000
events/s, that took a quarter of the health workers' time. `transformWithStateInPandas`
converts each Arrow batch column by column, and its fixed cost per key and batch (a DataFrame
in, a DataFrame out) is paid once per bucket. Both flavours keep the same state, but Spark
refuses to resume a checkpoint under another stateful operator than the one that wrote it: a
checkpoint keeps its flavour, which `streaming.state_layout` records with the number of buckets.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Iterator

from pyspark.sql.streaming import StatefulProcessorHandle

from . import codec
from .config import HealthConfig
from .processor import (STATE_SCHEMA, QuorumHealthPandasProcessor, QuorumHealthRowProcessor, _QuorumHealthLogic,
                        dead_letter_rows, freeze_worker_heap, is_dead_letter_key, records_by_quorum)
from .rows import quorum_signature
from .schema import KEY_COLUMNS, RECORD_JSON
from .state import QuorumState, decode, new_state

BUCKET_COLUMN = "_bucket"
# What a bucket's input rows carry besides their bucket: the packed record alone. Its quorum's
# key is in it (a raw record's as `_quorum`), and each column more costs PySpark's pandas input
# path about 0.3 us a record (measured: 1.5 us a record for two columns, 2.5 for five).
BUCKET_INPUT = [RECORD_JSON]
BUCKET_STATE = "bucket"
# Measured with benchmarks/job_throughput.py, 200 quorums in 16 buckets on local[2], one
# run each in the same half hour: at 16,860 events/s the health state took 405 ms a batch (its
# partitions summed) on pandas against 592 on rows, and the job sustained 21,178 events/s
# against 16,860.
BUCKETED_HEALTH_API = "pandas"


def news(rows: list[dict[str, Any]], shown: list | None, proc_ms: int, cfg: HealthConfig,
         keep: bool = False) -> tuple[list[dict[str, Any]], list | None]:
    """An evaluation's rows worth emitting, and what the quorum's rows show now: all of them, but
    a quorum row alone that shows what the quorum's last one showed (`shown`: its
    `rows.quorum_signature` and the batch time it came in), within `quorum_row_refresh_ms` of it.
    A steady quorum then costs the driver and the outputs a row per refresh, not per batch; any
    transition, window or replica row comes with its quorum's row, as the driver needs it."""
    if cfg.quorum_row_refresh_ms <= 0 or not rows or rows[-1]["kind"] != "quorum":
        return rows, shown
    signature = quorum_signature(rows[-1], cfg.hw_stall_after_ms)
    if (len(rows) == 1 and not keep and shown is not None and signature == shown[0]
            and proc_ms - shown[1] < cfg.quorum_row_refresh_ms):
        return [], shown
    return rows, [signature, proc_ms]


def bucket_column(buckets: int):
    """The bucket of each input row's quorum, 0 .. buckets - 1."""
    from pyspark.sql import functions as F
    return F.pmod(F.xxhash64(*KEY_COLUMNS), F.lit(buckets)).alias(BUCKET_COLUMN)


@functools.lru_cache(maxsize=1 << 16)
def _name(cluster_id: str, topic: str, partition: int) -> str:
    return json.dumps([cluster_id, topic, partition])


def quorum_name(key: tuple) -> str:
    """A quorum's entry in its bucket's value (JSON: no cluster id or topic can be ambiguous).
    Kept for the worker's life: each quorum's is asked for three times a batch, and `json.dumps`
    cost 10 us each."""
    return _name(key[0], key[1], int(key[2]))


def _quorum_of(st: QuorumState) -> tuple:
    return st.cluster_id, st.topic, st.partition


class _BucketLogic(_QuorumHealthLogic):
    """The per-quorum logic with its state read from and written to the open bucket."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        freeze_worker_heap()
        self.handle = handle
        self.bucket = handle.getValueState(BUCKET_STATE, STATE_SCHEMA)
        self.quorums: dict[str, QuorumState] = {}
        self.shown: dict[str, list] = {}  # each quorum's last emitted quorum row (`news`)
        self.timer_ms = -1

    def open_bucket(self) -> None:
        stored = self.bucket.get()
        value = codec.loads(stored[0]) if stored is not None else {"timer_ms": -1, "quorums": {}}
        self.quorums = {name: decode(st, self.state_version) for name, st in value["quorums"].items()}
        self.shown = value.get("shown") or {}  # a bucket saved before quorum rows were filtered has none
        self.timer_ms = value["timer_ms"]

    def close_bucket(self, proc_ms: int, fired: bool) -> None:
        """The bucket saved, its timer due when its earliest quorum is; an empty bucket (every
        quorum forgotten, or only rejects came) keeps neither a value nor a timer."""
        pending = -1 if fired else self.timer_ms  # a timer that fired is gone
        if not self.quorums:
            if pending >= 0:
                self.handle.deleteTimer(pending)
            self.bucket.clear()
            return
        # every quorum kept has a due time after this batch (on_input and on_timer set it)
        self.timer_ms = min(st.timer_ms for st in self.quorums.values())
        if pending != self.timer_ms:
            if pending >= 0:
                self.handle.deleteTimer(pending)
            self.handle.registerTimer(self.timer_ms)
        value = {"timer_ms": self.timer_ms, "quorums": self.quorums}
        if self.shown:
            value["shown"] = {name: self.shown[name] for name in self.quorums if name in self.shown}
        self.bucket.update((codec.dumps(value),))

    def due(self, proc_ms: int, evaluated: set[str]) -> list[dict[str, Any]]:
        """Rows of the bucket's quorums due by `proc_ms`, but those in `evaluated`."""
        rows: list[dict[str, Any]] = []
        for name, st in list(self.quorums.items()):
            if name not in evaluated and 0 <= st.timer_ms <= proc_ms:
                rows += self._news(name, self.on_timer(_quorum_of(st), proc_ms), proc_ms)
        return rows

    def _news(self, name: str, rows: list[dict[str, Any]], proc_ms: int, keep: bool = False) -> list[dict[str, Any]]:
        out, shown = news(rows, self.shown.get(name), proc_ms, self.cfg, keep)
        if shown is not None:
            self.shown[name] = shown
        return out

    def close_inputs(self, trackers: dict[str, Any], proc_ms: int) -> list[dict[str, Any]]:
        """Each quorum with input (`trackers`, by name) evaluated (`close_input`), with the rows
        worth emitting (`news`). With the refresh on, one quorum row is emitted whatever it shows,
        the one shown the longest ago: the driver learns from it that input came in this batch
        (snapshot.py judges a silent quorum against the latest such batch), and the bucket's
        quorums take turns refreshing."""
        out: list[dict[str, Any]] = []
        keep = None
        if self.cfg.quorum_row_refresh_ms > 0:
            keep = min(trackers, key=lambda name: self.shown.get(name, (None, -1))[1], default=None)
        for name, tracker in trackers.items():
            out += self._news(name, self.close_input(tracker, proc_ms), proc_ms, keep=name == keep)
        return out

    def _load(self, key: tuple) -> QuorumState:
        return self.quorums.get(quorum_name(key)) or new_state(key[0], key[1], int(key[2]))

    def _save(self, st: QuorumState) -> None:
        self.quorums[quorum_name(_quorum_of(st))] = st

    def _forget(self, st: QuorumState) -> None:
        self.quorums.pop(quorum_name(_quorum_of(st)), None)

    # a quorum's due time stays in its state (`timer_ms`); the bucket's timer serves them all
    def _register_timer(self, ms: int) -> None:
        pass

    def _delete_timer(self, ms: int) -> None:
        pass


class BucketedHealthProcessor(QuorumHealthRowProcessor):
    """For transformWithState grouped by `BUCKET_COLUMN`: input rows carry the packed record
    alone (`BUCKET_INPUT`; each record's quorum is in it); output rows are the health rows, as
    `QuorumHealthRowProcessor`'s."""

    logic_class = _BucketLogic

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Any]:
        proc_ms = timerValues.getCurrentProcessingTimeInMs()
        logic = self.logic
        logic.open_bucket()
        trackers: dict[str, Any] = {}  # by quorum_name
        rejects: dict[tuple, list[tuple[str, str]]] = {}
        # a bounded chunk at a time, so a backlog is never held whole (see processor.on_input)
        for texts in self._texts(rows):
            for quorum, records in records_by_quorum(texts, logic.wall_clock_ms, self.max_future_ms, rejects).items():
                # the key of records with no quorum gets no state (only rejects come under it)
                if not is_dead_letter_key(quorum):
                    name = quorum_name(quorum)
                    if name not in trackers:
                        trackers[name] = logic.open_input(quorum)
                    trackers[name].apply_all(records)
        out = logic.close_inputs(trackers, proc_ms)
        out += logic.due(proc_ms, set(trackers))
        for quorum, its_rejects in rejects.items():
            out += dead_letter_rows(quorum, its_rejects)
        logic.close_bucket(proc_ms, fired=False)
        yield from self._emit(out)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Any]:
        proc_ms = timerValues.getCurrentProcessingTimeInMs()
        self.logic.open_bucket()
        out = self.logic.due(proc_ms, set())
        self.logic.close_bucket(proc_ms, fired=True)
        yield from self._emit(out)


class BucketedHealthPandasProcessor(BucketedHealthProcessor):
    """For transformWithStateInPandas grouped by `BUCKET_COLUMN`: the same, with input and
    output as pandas DataFrames (`QuorumHealthPandasProcessor`'s)."""

    _texts = staticmethod(QuorumHealthPandasProcessor._texts)
    _emit = staticmethod(QuorumHealthPandasProcessor._emit)
