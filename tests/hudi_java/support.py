"""Apache Hudi's own Spark writer and reader for the tests: a Hudi release's Spark bundle,
fetched as tms fetches its own, in a PySpark session of its own.

The bundles are fetched by Spark's package resolution from Maven Central (else by Maven when
it is on PATH) into tms's bundle cache (`~/.cache/tms/hudi`; a Maven local repository at
`$TMS_MAVEN_CACHE`, else `~/.cache/tms/maven`, is read too). The test command fetches them
before pytest (`python -m tests.hudi_java.support`); a test that finds a jar there fetches
nothing, and test processes fetching at once fetch once (the cache's lock file).

Hudi builds a bundle per Spark minor line and Scala version. The releases used here are
served for Spark 3.5 and Scala 2.12 (`hudi-spark3.5-bundle_2.12`); none for Spark 4, and
PySpark 4's Scala 2.13 cannot load them (`NoClassDefFoundError: scala/Serializable`), which
is why pyproject.toml pins PySpark to 3.5.

A JVM holds one SparkContext and PySpark starts one JVM per process, while the project's Spark
tests share one session without Hudi (`tests/conftest.py`). So each Hudi release runs in a
child process of its own (`HudiSpark`): the tests send it writes and reads, and the child's
JVM writes its output to a log file that errors quote.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tms.spark_runtime import hudi_bundle

SPARK_LINE = "3.5"
"""The Spark minor line the bundles are built for; PySpark must be of it."""
SCALA = "2.12"
GROUP = "org.apache.hudi"
START_TIMEOUT = 300.0
CALL_TIMEOUT = 600.0


@dataclass(frozen=True)
class HudiRelease:
    version: str
    table_versions: tuple[int, ...]
    """The table versions it writes; a release before 1.0 writes version 6 only, and knows
    no `hoodie.write.table.version`."""

    @property
    def artifact(self) -> str:
        return f"hudi-spark{SPARK_LINE}-bundle_{SCALA}"

    @property
    def coordinates(self) -> str:
        return f"{GROUP}:{self.artifact}:{self.version}"

    def jar(self, cache: Path) -> Path:
        """Where the bundle lies in the cache (a Maven local repository)."""
        name = f"{self.artifact}-{self.version}.jar"
        return cache.joinpath(*GROUP.split("."), self.artifact, self.version, name)

    def write_options(self, table_version: int) -> dict[str, str]:
        """The writer's options that make it write `table_version`."""
        if table_version not in self.table_versions:
            raise ValueError(f"Hudi {self.version} does not write table version {table_version}")
        if self.version.startswith("0."):
            return {}
        return {"hoodie.write.table.version": str(table_version)}

    def __str__(self) -> str:
        return f"Hudi {self.version}"


HUDI_1_2 = HudiRelease("1.2.0", (6, 8, 9))
"""The newest Hudi 1.x release: writes table versions 6, 8 and 9 (9 by default)."""
HUDI_1_0 = HudiRelease("1.0.2", (6, 8))
"""The 1.0 line: writes table versions 6 and 8 (8 by default); its version 8 metadata files
carry 1.0's `HoodieMetadataRecord` (no `ArrayWrapper` among the column stats' value wrappers,
no `valueType`), which a later release's schema must not overwrite."""
HUDI_0_15 = HudiRelease("0.15.0", (6,))
"""The last release before 1.0: version 6 as the writers of that time write it."""
RELEASES = (HUDI_1_2, HUDI_1_0, HUDI_0_15)


def keyed_table(name: str, table_type: str = "MERGE_ON_READ") -> dict[str, str]:
    """Writer options for the tests' usual table: keyed by `key`, ordered by `ts`,
    partitioned by `part`, with shuffles sized for tens of rows."""
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.insert.shuffle.parallelism": "2",
        "hoodie.upsert.shuffle.parallelism": "2",
        "hoodie.delete.shuffle.parallelism": "2",
    }


class HudiJavaError(RuntimeError):
    """Hudi's Spark bundle could not be fetched or run."""


def fetch(release: HudiRelease) -> Path:
    """The release's Spark bundle in the cache, fetched as tms fetches its own unless it is
    there (Spark's package resolution, else Maven)."""
    try:
        return hudi_bundle.fetch(hudi_bundle.BundleSource(), release.version)
    except hudi_bundle.BundleFetchError as exc:
        raise HudiJavaError(str(exc)) from None


def check_pyspark() -> None:
    """PySpark must be of the Spark line the bundles are built for."""
    import pyspark

    if not pyspark.__version__.startswith(f"{SPARK_LINE}."):
        raise HudiJavaError(
            f"Hudi's Spark bundles are built for Spark {SPARK_LINE} (Scala {SCALA}) and this "
            f"environment has PySpark {pyspark.__version__}: `pip install -e '.[dev]'` installs "
            "the line pyproject.toml pins"
        )


def session_conf(jar: Path, workdir: Path, extra_jars: Sequence[Path] = ()) -> dict[str, str]:
    """The settings Hudi's Spark quick start gives, and the bundle (and `extra_jars`, a
    user's own classes) on the classpath."""
    return {
        "spark.jars": ",".join(str(j) for j in (jar, *extra_jars)),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
    }


class HudiSpark:
    """A Hudi release's SparkSession in a child process, driven from the tests' process."""

    def __init__(
        self,
        release: HudiRelease,
        process: multiprocessing.process.BaseProcess,
        connection: Connection,
        log: Path,
    ) -> None:
        self.release = release
        self._process = process
        self._connection = connection
        self.log = log
        """The child's output: its JVM's (Spark's and Hudi's log lines) among it."""
        self.spark_version = ""

    @classmethod
    def start(
        cls, release: HudiRelease, jar: Path, workdir: Path, extra_jars: Sequence[Path] = ()
    ) -> HudiSpark:
        """A child process with a SparkSession that has `jar` and `extra_jars`; its files go
        to `workdir`."""
        check_pyspark()
        workdir.mkdir(parents=True, exist_ok=True)
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(theirs, str(jar), str(workdir), [str(j) for j in extra_jars]),
            name=f"hudi-spark-{release.version}",
            daemon=True,
        )
        process.start()
        theirs.close()
        session = cls(release, process, ours, workdir / "spark.log")
        session.spark_version = str(session._answer(START_TIMEOUT))
        return session

    def write(
        self,
        path: Path | str,
        rows: Sequence[tuple[Any, ...]],
        schema: str,
        options: Mapping[str, str],
        mode: str = "append",
    ) -> None:
        """`df.write.format("hudi")` of `rows` (a DDL `schema`) with `options`."""
        self._call("write", str(path), list(rows), schema, dict(options), mode)

    def read(
        self,
        path: Path | str,
        columns: Sequence[str],
        options: Mapping[str, str] | None = None,
        where: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """`spark.read.format("hudi").options(**options).load(path)`, filtered by the SQL
        condition `where` if given: the `columns` of every row, sorted. Options choose the
        query (`hoodie.datasource.query.type` read_optimized or incremental, `as.of.instant`
        for time travel, `hoodie.enable.data.skipping`, ...)."""
        rows = self._call("read", str(path), list(columns), dict(options or {}), where)
        return sorted(tuple(row) for row in rows)

    def run(self, function: str, *args: Any) -> Any:
        """Call `function` ("package.module:name", importable in the child) in the child as
        `name(spark, *args)` and return what it returns (which must pickle): for a test's own
        steps that need Hudi's Java API through py4j, kept in the test's own module."""
        return self._call("run", function, *args)

    def close(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError):  # it ended already
                self._connection.send(("stop", ()))
            self._process.join(60)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(30)
        self._connection.close()

    def _call(self, operation: str, *args: Any) -> Any:
        self._connection.send((operation, args))
        return self._answer(CALL_TIMEOUT)

    def _answer(self, timeout: float) -> Any:
        if not self._connection.poll(timeout):
            raise HudiJavaError(f"{self.release}'s Spark gave no answer in {timeout:.0f} s")
        try:
            kind, value = self._connection.recv()
        except EOFError:
            self._process.join(10)
            raise HudiJavaError(
                f"{self.release}'s Spark process ended (exit {self._process.exitcode}); "
                f"the end of {self.log}:\n{_tail(self.log)}"
            ) from None
        if kind == "error":
            raise HudiJavaError(f"{self.release}'s Spark: {value}")
        return value


def _serve(connection: Connection, jar: str, workdir: str, extra_jars: list[str]) -> None:
    """The child process: a SparkSession with the bundle, answering until told to stop."""
    folder = Path(workdir)
    log = os.open(folder / "spark.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)  # the JVM inherits these
    os.dup2(log, 2)
    os.close(log)
    os.chdir(folder)
    from tms.spark_runtime import get_spark

    try:
        conf = session_conf(Path(jar), folder, [Path(j) for j in extra_jars])
        spark = get_spark("local[2]", "tms-tests-hudi", conf)
    except Exception as exc:
        connection.send(("error", _describe(exc)))
        return
    connection.send(("ready", spark.version))
    try:
        while True:
            try:
                operation, args = connection.recv()
            except EOFError:
                break
            if operation == "stop":
                break
            try:
                connection.send(("ok", _HANDLERS[operation](spark, *args)))
            except Exception as exc:
                connection.send(("error", _describe(exc)))
    finally:
        spark.stop()


def _write(
    spark: Any,
    path: str,
    rows: list[tuple[Any, ...]],
    schema: str,
    options: dict[str, str],
    mode: str,
) -> None:
    spark.createDataFrame(rows, schema).write.format("hudi").options(**options).mode(mode).save(
        path
    )


def _read(
    spark: Any, path: str, columns: list[str], options: dict[str, str], where: str | None
) -> list[tuple[Any, ...]]:
    frame = spark.read.format("hudi").options(**options).load(path)
    if where is not None:
        frame = frame.where(where)
    return [tuple(row) for row in frame.select(*columns).collect()]


def _run(spark: Any, function: str, *args: Any) -> Any:
    module_name, _, name = function.partition(":")
    return getattr(importlib.import_module(module_name), name)(spark, *args)


_HANDLERS: dict[str, Any] = {"write": _write, "read": _read, "run": _run}


def _describe(exc: BaseException) -> str:
    """The exception's class and first lines (a Java exception's message and its causes)."""
    lines = str(exc).strip().splitlines()
    head = [line for line in lines if not line.lstrip().startswith("at ")][:20]
    return f"{type(exc).__name__}: " + "\n".join(head)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def main(argv: Sequence[str]) -> int:
    """`python -m tests.hudi_java.support`: fetch every release's bundle into the cache."""
    if argv:
        print("usage: python -m tests.hudi_java.support", file=sys.stderr)
        return 2
    for release in RELEASES:
        jar = fetch(release)
        print(f"{release}: {jar} ({jar.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
