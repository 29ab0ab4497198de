"""A streaming query listener that hands each progress over as the JSON Spark writes.

PySpark's `StreamingQueryListener` converts every progress event field by field before calling
`onQueryProgress`: a py4j round trip for every field and every entry of every metrics map, and
class lookups that search every jar on the driver's class path. Measured with `local[2]` and a
1 s trigger: about 90 ms a batch, most of it driver JVM CPU; a job watching one quorum took
0.06-0.19 CPU s per s less without it (paired runs). This listener makes two calls per event
(`progress().json()`) and parses the text in Python.

    listener = ProgressListener(spark, lambda progress: ...)   # a dict, as `progress.json` reads
    ...
    listener.remove()
"""
from __future__ import annotations

import json
import logging
from typing import Callable

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class _ProgressCallback:
    """The Python side of Spark's `PythonStreamingQueryListener` interface, through py4j."""

    def __init__(self, on_progress: Callable[[dict], None]):
        self._on_progress = on_progress

    def onQueryStarted(self, jevent) -> None:  # noqa: N802 (Java's names)
        pass

    def onQueryProgress(self, jevent) -> None:  # noqa: N802
        try:
            self._on_progress(json.loads(jevent.progress().json()))
        except Exception:   # a listener's failure must not reach Spark's listener bus
            log.exception("handling a query progress event")

    def onQueryIdle(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class ProgressListener:
    """Registered on `spark`'s streaming query manager from construction until `remove()`."""

    def __init__(self, spark: SparkSession, on_progress: Callable[[dict], None]):
        from pyspark.java_gateway import ensure_callback_server_started
        gateway = spark.sparkContext._gateway
        ensure_callback_server_started(gateway)
        wrapper = gateway.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
        self._jlistener = wrapper(_ProgressCallback(on_progress))
        self._manager = spark._jsparkSession.streams()
        self._manager.addListener(self._jlistener)

    def remove(self) -> None:
        self._manager.removeListener(self._jlistener)
