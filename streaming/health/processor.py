"""The Spark stateful processor around `QuorumTracker`: state in the RocksDB store, timers.

Keyed by (cluster_id, topic, partition): one key is one quorum (see tracker.py for why). This is
the layout of a checkpoint started before the quorums were kept in buckets; `buckets.py` keeps
several quorums under one key with this module's logic, for every new checkpoint.
State: the whole quorum, its replicas included, as one JSON value. Every call on a state
variable is a round trip to the JVM's state server, and profiling a busy job showed those round
trips, not the JSON, taking the time: with one map entry per replica (the layout before), a
quorum of five cost about eleven round trips a batch, now five (the key, get, update and the
timer's two). A value written by that layout (no `replicas` in it) is read with its map and
moved into the value at its next save. Replica rows are emitted only when what they show
changed (and in full once per job run, so a restarted driver gets the whole picture), quorum
rows at every evaluation.

Time: statuses are computed on the records' own clocks (see tracker.py and clocks.py), so a
test can replay ten minutes of synthetic time in seconds. Silence is found by a processing-time
timer that fires every `tick_ms`: with no input for the quorum, its clock moves on with the
processing time since its last input, and everything is re-evaluated. A quorum that stays
silent loses its leader and its replicas go `unknown` (not `unreachable`: nobody is alive to
say they stopped fetching).

Implementation choice, by measurement (local[2] on the shared 2-core machine, RocksDB state, two
micro-batches, best of two alternating rounds after a warm-up):

  2,000 keys x 20 records per key per batch: transformWithState (rows) 4,919 records/s,
                                             transformWithStateInPandas 1,502 (ratio 0.31)
    400 keys x 150 records per key per batch: rows 5,744, pandas 5,863 (ratio 1.02; no warm-up)

Pandas pays a fixed cost per key and batch (a DataFrame in, a DataFrame out) that Arrow only
earns back on large groups. A quorum sends a few to a few tens of records per trigger (one per
fetch its leader handles, a fetch every few hundred ms per follower, plus metrics), the first
case, so a checkpoint kept one quorum per key runs on the row-based transformWithState. Both
adapters share the tracker and the state layout, so the choice is the one constant `HEALTH_API`.
A bucket of quorums (buckets.py) is the second case, and runs on pandas (`BUCKETED_HEALTH_API`).
"""
from __future__ import annotations

import gc
import time
from itertools import chain, islice
from typing import Any, Callable, Iterable, Iterator

from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from quorum.events import DEFAULT_MAX_FUTURE_MS

from . import codec
from .clocks import anchor_processing
from .config import HealthConfig
from .raw_records import decide, is_raw
from .schema import DEAD_LETTER_KEY, DEAD_LETTER_KIND, HEALTH_JSON, RECORD_JSON, pack_health_row, unpack_record
from .state import STATE_VERSION, QuorumState, decode, new_state
from .tracker import QuorumTracker

# Types, not DDL text: PySpark sends DDL to the JVM to be parsed (a round trip and Spark's SQL
# parser) every time a task opens its state, each micro-batch.
STATE_SCHEMA = StructType([StructField("json", StringType())])
REPLICA_KEY_SCHEMA = StructType([StructField("replica", StringType())])
# one quorum per key: "row" (transformWithState, measured faster here) or "pandas" (transformWithStateInPandas)
HEALTH_API = "row"
CHUNK_RECORDS = 20_000  # records of one quorum converted and folded in at a time


def freeze_worker_heap() -> None:
    """Once per process: every object alive now (the modules a Python worker imported: PySpark,
    pandas, pyarrow, this job) leaves the cyclic garbage collector's reach for good.

    PySpark's daemon runs a full `gc.collect()` in a reused worker after every task, and a
    health task's worker holds about 75,000 objects: each collect walked them all, about 40 ms
    of CPU a task, two tasks a micro-batch on `local[2]`, with or without input. Frozen objects
    are still freed when nothing refers to them; only a reference cycle among them would stay.
    """
    global _heap_frozen
    if not _heap_frozen:
        gc.collect()  # what is garbage now goes before the rest is frozen
        gc.freeze()
        _heap_frozen = True


_heap_frozen = False


def chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    """`items` a bounded list at a time, so a backlog is never held whole (see `on_input`)."""
    items = iter(items)
    while chunk := list(islice(items, CHUNK_RECORDS)):
        yield chunk


class _QuorumHealthLogic:
    """What both processors do, on plain lists of record dicts and output row dicts."""

    def __init__(self, cfg: HealthConfig, wall_clock_ms: Callable[[], int] | None = None,
                 state_version: int = STATE_VERSION):
        """`state_version`: the version the checkpoint's health state was written in (state.py)."""
        self.cfg = cfg
        self.state_version = state_version
        # Silence is measured from when the input was *processed* (wall clock), not from the
        # start of its micro-batch, so a slow batch does not count as the quorum being silent.
        self.wall_clock_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        # Made on the driver when the query starts: a new run emits every replica row once.
        self.run_id = self.wall_clock_ms()

    def init(self, handle: StatefulProcessorHandle) -> None:
        freeze_worker_heap()
        self.handle = handle
        self.state = handle.getValueState("quorum", STATE_SCHEMA)
        # the layout before: one entry per replica, read once and emptied (see the docstring)
        self.replicas = handle.getMapState("replicas", REPLICA_KEY_SCHEMA, STATE_SCHEMA)
        self._replicas_in_map = False

    def _load(self, key: tuple) -> QuorumState:
        stored = self.state.get()
        self._replicas_in_map = False
        if stored is None:
            key = _quorum_key(key)
            return new_state(key[0], key[1], int(key[2]))
        st = codec.loads(stored[0])
        if "replicas" not in st:
            st["replicas"] = {k[0]: codec.loads(v[0]) for k, v in self.replicas.iterator()}
            self._replicas_in_map = True
        return decode(st, self.state_version)

    def _save(self, st: QuorumState) -> None:
        self.state.update((codec.dumps(st),))
        if self._replicas_in_map:
            self.replicas.clear()
            self._replicas_in_map = False

    def _forget(self, st: QuorumState) -> None:
        self.state.clear()
        self.replicas.clear()

    def _register_timer(self, ms: int) -> None:
        self.handle.registerTimer(ms)

    def _delete_timer(self, ms: int) -> None:
        self.handle.deleteTimer(ms)

    def on_input(self, key: tuple, chunks: Iterable[list[dict[str, Any]]], proc_ms: int) -> list[dict[str, Any]]:
        """`chunks`: the quorum's records of this micro-batch, a bounded list at a time, so a
        backlog (an hour of a quorum with a hundred observers is a million records) is folded in
        without ever being held in memory whole."""
        tracker = self.open_input(key)
        for records in chunks:
            tracker.apply_all(records)
        return self.close_input(tracker, proc_ms)

    def open_input(self, key: tuple) -> QuorumTracker:
        """The quorum's tracker, to fold this batch's records into before `close_input`."""
        return QuorumTracker(self.cfg, self._load(key), self.run_id)

    def close_input(self, tracker: QuorumTracker, proc_ms: int) -> list[dict[str, Any]]:
        """The quorum evaluated after its batch's records, its timer set and its state saved."""
        st = tracker.s
        st.last_input_proc_ms = proc_ms
        st.last_input_wall_ms = max(proc_ms, self.wall_clock_ms())
        rows = tracker.evaluate(proc_ms, silent=False, wall_ms=st.last_input_wall_ms)
        if 0 <= st.timer_ms <= proc_ms:
            # Due in this very batch, where it would only load and save the state just evaluated:
            # a quorum that sends in every batch is then never visited twice per batch.
            self._delete_timer(st.timer_ms)
            st.timer_ms = -1
        if st.timer_ms < 0:
            st.timer_ms = proc_ms + self.cfg.tick_ms
            self._register_timer(st.timer_ms)
        self._save(st)
        return rows

    def on_timer(self, key: tuple, proc_ms: int) -> list[dict[str, Any]]:
        st = self._load(key)
        # The job's own downtime (a crash, a restart) is not the quorum's silence: silence is
        # counted from this run's start at the earliest, and the first tick of a run restarts
        # the processing clock where the quorum's clock stands, rather than moving it on by the
        # time the job was away (its records of that time are still to be read).
        if st.emitted_run != self.run_id:
            anchor_processing(st.clock, proc_ms)
        # the wall clock of the last input, never before its batch's time (a state saved before
        # the wall clock was kept has the batch's time alone)
        silence = max(0, proc_ms - max(st.last_input_wall_ms, st.last_input_proc_ms, self.run_id))
        if silence >= self.cfg.quorum_forget_ms:
            self._forget(st)
            st.event_seq += 1
            return [{"kind": "forget", "cluster_id": st.cluster_id, "topic": st.topic,
                     "partition": st.partition, "seq": st.seq + 1, "event_seq": st.event_seq,
                     "now_ms": st.clock["now"] + silence, "proc_ms": proc_ms,
                     "last_input_proc_ms": st.last_input_proc_ms, "silent": True,
                     "reason": f"quorum silent for {silence} ms"}]
        st.timer_ms = proc_ms + self.cfg.tick_ms
        self._register_timer(st.timer_ms)
        rows: list[dict[str, Any]] = []
        if st.last_input_proc_ms != proc_ms:  # else on_input has just evaluated and emitted
            rows = QuorumTracker(self.cfg, st, self.run_id).evaluate(proc_ms, silent=True)
        self._save(st)
        return rows


class _QuorumHealthProcessor(StatefulProcessor):
    """The handlers Spark calls; subclasses only convert input and output (or, with a
    `logic_class` of their own, keep the state another way)."""

    logic_class = _QuorumHealthLogic

    def __init__(self, cfg: HealthConfig, wall_clock_ms: Callable[[], int] | None = None,
                 max_future_ms: int = DEFAULT_MAX_FUTURE_MS, state_version: int = STATE_VERSION):
        self.logic = self.logic_class(cfg, wall_clock_ms, state_version)
        self.max_future_ms = max_future_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.logic.init(handle)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Any]:
        key = _quorum_key(key)
        rejects: list[tuple[str, str]] = []
        chunks = self._records(rows, rejects)
        if is_dead_letter_key(key):  # no quorum: only rejects come here, and no state is kept
            for _ in chunks:
                pass
            yield from self._emit(dead_letter_rows(key, rejects))
            return
        # A key whose records were all rejected (a quorum key on garbage) gets no state either.
        first: list[dict[str, Any]] = []
        for first in chunks:
            if first:
                break
        if first:
            out = self.logic.on_input(key, chain([first], chunks), timerValues.getCurrentProcessingTimeInMs())
            yield from self._emit(out)
        yield from self._emit(dead_letter_rows(key, rejects))

    def _records(self, rows, rejects: list[tuple[str, str]]) -> Iterator[list[dict[str, Any]]]:
        """The key's records for the tracker, a bounded list at a time; those Spark's fast path
        did not accept are decided here (`raw_records`), their rejects appended to `rejects`."""
        for texts in self._texts(rows):
            yield records_of(texts, self.logic.wall_clock_ms, self.max_future_ms, rejects)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Any]:
        out = self.logic.on_timer(key, timerValues.getCurrentProcessingTimeInMs())
        if out:
            yield from self._emit(out)

    def close(self) -> None:
        pass


def records_by_quorum(texts: Iterable[str], wall_clock_ms: Callable[[], int], max_future_ms: int,
                      rejects: dict[tuple, list[tuple[str, str]]]) -> dict[tuple, list[dict[str, Any]]]:
    """Packed records as the tracker takes them, under their quorum's key (a packed record's own;
    a raw one's as Spark read it, `raw_records`, which decides it here). Rejects are appended to
    `rejects` under their key."""
    records: dict[tuple, list[dict[str, Any]]] = {}
    for t in texts:
        if not is_raw(t):
            record = unpack_record(t)
            records.setdefault((record["cluster_id"], record["topic"], record["partition"]), []).append(record)
            continue
        key, record, reject = decide(t, wall_clock_ms(), max_future_ms)
        if record is not None:
            records.setdefault(key, []).append(record)
        else:
            rejects.setdefault(key, []).append(reject)
    return records


def records_of(texts: Iterable[str], wall_clock_ms: Callable[[], int], max_future_ms: int,
               rejects: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """One quorum's packed records as the tracker takes them (`records_by_quorum`), its rejects
    appended to `rejects`."""
    rejected: dict[tuple, list[tuple[str, str]]] = {}
    records = records_by_quorum(texts, wall_clock_ms, max_future_ms, rejected)
    for its_rejects in rejected.values():
        rejects += its_rejects
    return [record for its_records in records.values() for record in its_records]


def dead_letter_rows(key: tuple, rejects: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"kind": DEAD_LETTER_KIND, "cluster_id": key[0], "topic": key[1], "partition": key[2],
             "status": reason, "dead_letter": line} for reason, line in rejects]


def _quorum_key(key: tuple) -> tuple:
    """(cluster_id, topic, partition) of the key Spark hands the processor."""
    return key[0] if len(key) == 1 else key  # TwsTester wraps the whole key in a 1-tuple


def is_dead_letter_key(key: tuple) -> bool:
    return _quorum_key(key)[0] == DEAD_LETTER_KEY[0]


class QuorumHealthPandasProcessor(_QuorumHealthProcessor):
    """For transformWithStateInPandas: input and output are pandas DataFrames."""

    @staticmethod
    def _texts(frames) -> Iterator[list[str]]:
        for pdf in frames:
            yield from chunks(pdf[RECORD_JSON].tolist())

    @staticmethod
    def _emit(out: list[dict[str, Any]]):
        import pandas as pd
        yield pd.DataFrame({HEALTH_JSON: [pack_health_row(r) for r in out]}, dtype=object)


class QuorumHealthRowProcessor(_QuorumHealthProcessor):
    """For the row-based transformWithState: input and output are Rows."""

    @staticmethod
    def _texts(rows) -> Iterator[list[str]]:
        return chunks(r[RECORD_JSON] for r in rows)

    @staticmethod
    def _emit(out: list[dict[str, Any]]):
        from pyspark.sql import Row
        for r in out:
            yield Row(health_json=pack_health_row(r))
