"""Stopping the job lets the running micro-batch end first: a stop in the middle of one cuts its
writer short (the batch runs again after a restart) and makes Spark log a StackOverflowError.
Runs a real streaming query whose writer holds its batch until the test lets it go."""
from __future__ import annotations

import threading
import time

import pytest

from streaming.job import RunningJob, _between_batches

pytestmark = pytest.mark.spark


class _Writer:
    """A foreachBatch writer that holds every batch until released, and says which batches
    started and which ran to their end."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.started: list[int] = []
        self.finished: list[int] = []
        self.closed = False

    def __call__(self, df, batch_id: int) -> None:
        self.started.append(batch_id)
        self.entered.set()
        assert self.release.wait(60), "the test never released the batch"
        df.count()   # a Spark job after the hold: a stop that interrupted the batch fails here
        self.finished.append(batch_id)

    def close(self) -> None:
        self.closed = True


class _Listener:
    def remove(self) -> None:
        pass


def _start(spark, writer: _Writer, trigger: str):
    return (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
            .writeStream.foreachBatch(writer).trigger(processingTime=trigger).start())


def _trigger_with_no_batch_due_for(seconds: int) -> str:
    """A processing-time trigger whose next batch after the first is at least `seconds` away.
    Spark runs the first batch at once and the next at the following multiple of the interval
    since the epoch, however soon that is (a 30 s trigger started at :59.5 runs again at :00)."""
    now_s = time.time()
    interval_s = next(i for i in range(1800, 3600) if i - now_s % i > seconds)
    return f"{interval_s} seconds"


def test_a_stop_waits_for_the_running_micro_batch_to_end(spark):
    writer = _Writer()
    # A trigger whose next batch is minutes away: once the held batch ends the query idles, so
    # nothing else can begin before the stop (with a short trigger the next batch starts at
    # once, and the race of the back-to-back test below applies).
    query = _start(spark, writer, _trigger_with_no_batch_due_for(300))
    job = RunningJob(spark, query, writer, _Listener(), [query])
    try:
        assert writer.entered.wait(60), "no micro-batch started"
        stopper = threading.Thread(target=job.stop)
        stopper.start()
        stopper.join(1.0)
        assert stopper.is_alive() and query.isActive, "the stop did not wait for the running batch"
        writer.release.set()
        stopper.join(60)
        assert not stopper.is_alive(), "the stop did not finish once the batch ended"
    finally:
        writer.release.set()
        query.stop()
    assert not query.isActive and query.exception() is None
    assert writer.started and writer.finished == writer.started   # every batch begun ran to its end
    assert writer.closed


def test_a_batch_that_outlasts_the_wait_is_stopped_all_the_same(spark, caplog):
    writer = _Writer()
    query = _start(spark, writer, "100 milliseconds")
    job = RunningJob(spark, query, writer, _Listener(), [query])
    try:
        assert writer.entered.wait(60), "no micro-batch started"
        stopper = threading.Thread(target=job.stop, kwargs={"batch_wait_s": 0.5})
        stopper.start()
        deadline = time.monotonic() + 30
        while "in the middle of a micro-batch" not in caplog.text:
            assert time.monotonic() < deadline, "no warning that the batch is stopped midway"
            assert stopper.is_alive(), "the stop ended while its batch was still held"
            stopper.join(0.05)
        # the stop now interrupts the batch, which its Python writer only notices once released
        writer.release.set()
        stopper.join(60)
        assert not stopper.is_alive()
    finally:
        writer.release.set()
        query.stop()
    assert not query.isActive
    assert writer.finished != writer.started   # the held batch was cut short


class _SlowWriter:
    """A foreachBatch writer whose every batch outlasts the trigger, so batches run back to back
    and the query is never idle between them."""

    def __init__(self, batch_s: float) -> None:
        self.batch_s = batch_s
        self.never = threading.Event()
        self.started: list[int] = []
        self.finished: list[int] = []

    def __call__(self, df, batch_id: int) -> None:
        self.started.append(batch_id)
        df.count()
        self.never.wait(self.batch_s)   # the batch's own work, longer than the trigger
        df.count()   # a Spark job after it: a stop that interrupted the batch fails here
        self.finished.append(batch_id)

    def close(self) -> None:
        pass


def _await_two_batches(writer: _SlowWriter, query) -> None:
    deadline = time.monotonic() + 60
    while len(writer.finished) < 2:
        assert time.monotonic() < deadline, "no two micro-batches within 60 s"
        assert query.exception() is None, query.exception()
        time.sleep(0.05)


def test_a_stop_among_batches_that_run_back_to_back_waits_for_the_next_boundary(spark, caplog):
    writer = _SlowWriter(batch_s=0.4)
    query = _start(spark, writer, "100 milliseconds")
    job = RunningJob(spark, query, writer, _Listener(), [query])
    try:
        _await_two_batches(writer, query)   # batches now follow each other with no idle time
        started = time.monotonic()
        job.stop(batch_wait_s=10)
        assert time.monotonic() - started < 3.5   # at the next batch boundary, not at the deadline
    finally:
        query.stop()
    assert query.exception() is None
    assert "in the middle of a micro-batch" not in caplog.text
    # Not asserted: that no batch was begun and left unfinished. The next batch starts at once
    # when they run back to back, and with a plan this small it can reach its writer before the
    # stop does (1 run in 7 here); the job's larger plan leaves more room.


def test_back_to_back_batches_are_seen_between_as_one_reports_its_progress(spark):
    # Spark marks the trigger inactive only for an instant between batches that run back to back
    # (on a cluster the job's stop once polled through 19 of them): the batch reporting its
    # progress is what says that one has ended.
    writer = _SlowWriter(batch_s=0.4)
    query = _start(spark, writer, "100 milliseconds")
    try:
        _await_two_batches(writer, query)
        for _ in range(3):
            started = time.monotonic()
            assert _between_batches(query, time.monotonic() + 10, poll_s=0.25), "no batch ended within 10 s"
            assert time.monotonic() - started < 3.5   # about one batch, not a lucky poll after many
    finally:
        query.stop()
