"""`reduce.reduce_fetches`'s rule on Arrow batches: the job's stage before the health state.

The job reduces each micro-batch's records where they are read, before they are shuffled to
their quorum's state: Spark hands each read task's records to `reduce_partition` as Arrow
batches (`mapInArrow`), and only the records kept go on, so the health processor's Python sees
about two records per replica per tick and source run, not one per fetch. The rule is the
record-by-record one of `reduce.py` (tests check both give the same records), done on whole
columns with numpy: a quorum's records are put in arrival order (Kafka partition and offset),
runs are numbered by cumulative sums over the breaks, and only the kept last record of a run
that stands for dropped ones is touched in Python (its JSON gets the run's gap measures).

Runs do not span Arrow batches or read tasks: a run cut there keeps one more record, and the
tracker folds the pieces in Kafka order all the same.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from . import reduce as R

# Columns the job's decoding adds for this stage (`streaming.decode.route_records`), null except
# on a fetch record Spark accepted. `FETCH_VIEW`: a valid fetch carrying the leader's view.
FETCH_LEADER, FETCH_EPOCH, FETCH_REPLICA, FETCH_ROLE = "_fetch_leader", "_fetch_epoch", "_fetch_replica", "_fetch_role"
FETCH_VIEW, FETCH_STAMP, FETCH_OFFSET = "_fetch_view", "_fetch_stamp", "_fetch_offset"
FETCH_CAUGHT_UP = "_fetch_caught_up"  # the leader's last caught-up time of the replica
FETCH_HIGH_WATERMARK = "_fetch_high_watermark"
METRICS_LEADER, METRICS_EPOCH = "_metrics_leader", "_metrics_epoch"  # null except on a metrics record
KAFKA_PARTITION, KAFKA_OFFSET = "_kafka_partition", "_offset"
RUN_COLUMNS = [FETCH_LEADER, FETCH_EPOCH, FETCH_REPLICA, FETCH_ROLE, FETCH_VIEW, FETCH_STAMP, FETCH_OFFSET,
               FETCH_CAUGHT_UP, FETCH_HIGH_WATERMARK, METRICS_LEADER, METRICS_EPOCH, KAFKA_PARTITION, KAFKA_OFFSET]


def _ints(batch, name: str, missing: int = -1) -> np.ndarray:
    import pyarrow.compute as pc
    return pc.fill_null(batch.column(name), missing).to_numpy(zero_copy_only=False).astype(np.int64)


def _codes(column) -> np.ndarray:
    """Small integers that are equal where the values are (nulls alike)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    encoded = pc.dictionary_encode(column.cast(pa.string()) if column.type != pa.string() else column)
    return pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _changes(*columns: np.ndarray) -> np.ndarray:
    """True where any column differs from the row before (and at the first row)."""
    out = np.zeros(len(columns[0]), dtype=bool)
    if len(out):
        out[0] = True
    for c in columns:
        out[1:] |= c[1:] != c[:-1]
    return out


def plan(batch, key_columns: list[str], tick_ms: int):
    """Which rows of `batch` are kept, and for the kept last records that stand for dropped
    fetches: their row, gaps, peak, mean and first-gap mean (`reduce._Run`'s measures)."""
    n = batch.num_rows
    quorum = np.zeros(n, dtype=np.int64)
    for name in key_columns:  # one code per quorum key (a mixed radix over the columns' codes)
        codes = _codes(batch.column(name))
        quorum = quorum * (int(codes.max(initial=0)) + 2) + codes + 1
    leader = _ints(batch, FETCH_LEADER)
    fetch = leader >= 0
    epoch, replica = _ints(batch, FETCH_EPOCH), _ints(batch, FETCH_REPLICA)
    role = _codes(batch.column(FETCH_ROLE))
    view = _ints(batch, FETCH_VIEW, 0) > 0
    stamp, offset = _ints(batch, FETCH_STAMP), _ints(batch, FETCH_OFFSET)
    caught_up, high_watermark = _ints(batch, FETCH_CAUGHT_UP), _ints(batch, FETCH_HIGH_WATERMARK)
    metrics_leader, metrics_epoch = _ints(batch, METRICS_LEADER), _ints(batch, METRICS_EPOCH)

    # A quorum's records in arrival order. Segments end where another source speaks, except a
    # node's metrics under the leader and epoch of the newest fetch before it: that fetch alone
    # ends its run there (`split`).
    arrival = np.lexsort((_ints(batch, KAFKA_OFFSET), _ints(batch, KAFKA_PARTITION), quorum))
    q, f = quorum[arrival], fetch[arrival]
    new_quorum = _changes(q)
    index = np.where(f, np.arange(n), -1)
    starts_at = np.maximum.accumulate(np.where(new_quorum, np.arange(n), 0))
    latest = np.maximum.accumulate(index)  # the newest fetch so far (-1: none), in arrival order
    before = np.concatenate(([-1], latest[:-1]))
    before[before < starts_at] = -1  # not of another quorum
    has_before = before >= 0
    ld_before = np.where(has_before, leader[arrival][np.maximum(before, 0)], -1)
    ep_before = np.where(has_before, epoch[arrival][np.maximum(before, 0)], -1)
    benign = (~f & has_before & (metrics_leader[arrival] == ld_before) & (metrics_epoch[arrival] == ep_before)
              & (metrics_leader[arrival] >= 0))
    brk = new_quorum | (~f & ~benign) | (f & has_before & (leader[arrival] != ld_before))
    segment = np.empty(n, dtype=np.int64)
    segment[arrival] = np.cumsum(brk)
    split = np.zeros(n, dtype=bool)
    split[arrival[before[benign]]] = True

    # the high watermark moving on after a quarter of a tick or more without moving: kept
    resumed = np.zeros(n, dtype=bool)
    in_order = arrival[f]
    hw, at, qs = high_watermark[in_order], stamp[in_order], quorum[in_order]
    bounds = np.flatnonzero(_changes(qs)).tolist() + [len(in_order)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # each quorum's fetches
        before = np.maximum.accumulate(np.concatenate(([-1], hw[lo:hi - 1])))
        advances = hw[lo:hi] > before
        index = np.where(advances, np.arange(hi - lo), -1)
        last = np.concatenate(([-1], np.maximum.accumulate(index)[:-1]))  # the advance before
        paused = (last < 0) | (at[lo:hi] - at[lo:hi][np.maximum(last, 0)] >= tick_ms // 4)
        resumed[in_order[lo:hi]] = advances & paused

    # each replica's fetches in arrival order. A record is reducible when it is a valid fetch
    # with the leader's view, caught up as of the replica's previous valid fetch in the batch (or
    # at this one); a run breaks at one that is not, at another segment or tick, and where the
    # stamp or the fetch offset goes back.
    position = np.empty(n, dtype=np.int64)
    position[arrival] = np.arange(n)
    rows = np.flatnonzero(fetch)
    rows = rows[np.lexsort((position[rows], role[rows], replica[rows], epoch[rows], leader[rows], quorum[rows]))]
    v, st, off = view[rows], stamp[rows], offset[rows]
    same_key = ~_changes(quorum[rows], leader[rows], epoch[rows], replica[rows], role[rows])
    after_valid = np.zeros(len(rows), dtype=bool)
    after_valid[1:] = same_key[1:] & v[:-1]
    previous = np.where(after_valid, np.roll(st, 1), st)
    v &= caught_up[rows] >= previous
    alone = ~v | resumed[rows]
    new_run = alone | ~same_key | _changes(segment[rows], st // tick_ms)
    new_run[1:] |= alone[:-1] | split[rows][:-1] | (st[1:] < st[:-1]) | (off[1:] < off[:-1])
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(rows))[:len(starts)] - 1  # no fetch: no run
    keep = np.ones(n, dtype=bool)
    dropped = np.ones(len(rows), dtype=bool)
    dropped[starts], dropped[ends] = False, False
    keep[rows[dropped]] = False

    # the measures of runs of three or more records, position by position across all runs
    long_runs = np.flatnonzero(ends - starts >= 2)
    first, length = starts[long_runs], ends[long_runs] - starts[long_runs] + 1
    gaps = np.zeros(len(long_runs), dtype=np.int64)
    peak = np.full(len(long_runs), -1, dtype=np.int64)
    mean = np.zeros(len(long_runs))
    first_mean = np.full(len(long_runs), -1.0)
    for p in range(1, int(length.max(initial=1))):
        on = np.flatnonzero(length > p)
        gap = st[first[on] + p] - st[first[on] + p - 1]
        on, gap = on[gap > 0], gap[gap > 0]
        gaps[on] += 1
        peak[on] = np.maximum(gap, peak[on] * 3 // 4)
        mean[on] = (2 * mean[on] + gap) / 3
        first_mean[on] = np.where(first_mean[on] < 0, gap, (2 * first_mean[on] + gap) / 3)
    marked = gaps > 1  # as reduce_fetches: a last record standing for one gap is kept as it is
    return keep, rows[ends[long_runs]][marked], gaps[marked], peak[marked], mean[marked], first_mean[marked]


def with_measures(text: str, gaps: int, peak: int, mean: float, first_mean: float) -> str:
    """A packed record (a JSON object) with the run's measures added."""
    return (f'{text[:-1]},"{R.FETCHES}":{gaps},"{R.GAP_PEAK_MS}":{peak},"{R.GAP_MEAN_MS}":{mean!r},'
            f'"{R.GAP_FIRST_MEAN_MS}":{first_mean!r}}}')


def reduce_batch(batch, key_columns: list[str], record_column: str, tick_ms: int):
    """The kept rows of one Arrow batch, with `key_columns` and `record_column` only."""
    import pyarrow as pa
    import pyarrow.compute as pc
    keep, lasts, gaps, peak, mean, first_mean = plan(batch, key_columns, tick_ms)
    texts = batch.column(record_column)
    if len(lasts):
        marked = np.zeros(batch.num_rows, dtype=bool)
        marked[lasts] = True
        order = np.argsort(lasts)  # replace_with_mask fills the masked rows in row order
        old = texts.take(pa.array(lasts[order])).to_pylist()
        new = [with_measures(t, g, p, m, fm) for t, g, p, m, fm in
               zip(old, gaps[order].tolist(), peak[order].tolist(), mean[order].tolist(),
                   first_mean[order].tolist())]
        texts = pc.replace_with_mask(texts, pa.array(marked), pa.array(new, type=texts.type))
    out = pa.RecordBatch.from_arrays([batch.column(c) for c in key_columns] + [texts],
                                     names=key_columns + [record_column])
    return out.filter(pa.array(keep))


def reduce_partition(key_columns: list[str], record_column: str, tick_ms: int):
    """The function `mapInArrow` runs on each read task's batches."""
    def run(batches: Iterator) -> Iterator:
        for batch in batches:
            if batch.num_rows:
                yield reduce_batch(batch, key_columns, record_column, tick_ms)
    return run


def reduce_stream(routed, tick_ms: int):
    """The job's routed records (`streaming.decode.route_records`) reduced where they are read:
    the quorum key and `record_json` of each record kept."""
    from pyspark.sql import types as T
    from .schema import KEY_COLUMNS, RECORD_JSON
    fields = {f.name: f for f in routed.schema.fields}
    schema = T.StructType([fields[c] for c in KEY_COLUMNS + [RECORD_JSON]])
    return (routed.select(*KEY_COLUMNS, RECORD_JSON, *RUN_COLUMNS)
            .mapInArrow(reduce_partition(KEY_COLUMNS, RECORD_JSON, tick_ms), schema))
