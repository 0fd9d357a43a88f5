"""The one place a SparkSession is made: master and `k=v` settings from the caller, quiet and small by default
(no UI, few shuffle partitions), reused for the life of the process. A missing pyspark or Java is a usage
error naming what to install, never a traceback."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from attribution.config import env, set_default_env
from attribution.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",  # our timestamps are UTC instants; never the JVM's zone
    # AQE joins by hash, not by sorting both sides, where each partition of the smaller side's shuffle holds at
    # most this much (the requests' events, per key: 0.87x the join's task CPU on the 1M store); a bigger one
    # keeps the sort-merge join
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": "256m",
}
# A local master's JVM lives for one command: on a small store HotSpot's optimizing compiler (C2) spent 46% of
# its CPU (38 of 83 s for `lengths` on the 100k-request sample store, profiled per JVM thread), compiling code
# the command is over before it pays back; the quick compiler alone (C1) and the serial collector give the same
# answers for 0.6x the CPU. On a 1M-request store the tasks' work dominates and C2's code pays: C1 alone cost
# 1.15x (bench/scale/README.md). So only for a small store (attribution.spark.connection.QUICK_JIT_ROWS), on a
# local master, when the caller gives no JVM options of its own.
LOCAL_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """`--spark-conf k=v` strings as a dict; a pair without `=` is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {pair!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def require() -> None:
    """A usage error when pyspark or a Java runtime is missing (checked without starting anything)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("--engine spark needs pyspark: pip install 'attribution[spark]'")
    if shutil.which("java") is None and not env("JAVA_HOME"):
        raise UsageError("--engine spark needs a Java runtime (17 or later) on PATH or in JAVA_HOME")


def session_conf(master: str | None = None, conf: dict[str, str] | None = None, *, quick_jit: bool = False
                 ) -> dict[str, str]:
    """The settings a session starts with: DEFAULT_CONF, LOCAL_CONF on a local master when `quick_jit` (a
    small store), then the caller's."""
    local = LOCAL_CONF if quick_jit and (master or DEFAULT_MASTER).startswith("local") else {}
    return {**DEFAULT_CONF, **local, **(conf or {})}


def get_session(master: str | None = None, conf: dict[str, str] | None = None, *, quick_jit: bool = False
                ) -> SparkSession:
    """The process's SparkSession (created on first use; a later call with other settings gets the same one,
    as Spark itself does); `quick_jit`: the JVM of a local master compiles with C1 alone (session_conf)."""
    require()
    from pyspark.sql import SparkSession

    if (master or DEFAULT_MASTER).startswith("local"):
        # a local master's Python workers run this interpreter (Spark's default, `python3` on PATH, may lack
        # our packages); read when the first session starts, so set before it. On a cluster PYSPARK_PYTHON
        # names the executors' Python.
        set_default_env("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName("attribution")
    for key, value in session_conf(master, conf, quick_jit=quick_jit).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
