"""Apache Hudi's Spark bundle on a job's Spark, for Hudi's own table-service code (the `hudi`
executor): which jar, how it is obtained when it is missing, and the Spark configs Hudi needs
beside it.

The bundle is Hudi's release `HUDI_VERSION` for Spark 3.5 and Scala 2.12, a Maven artifact.
One release serves table versions 6, 8 and 9 (it writes each at its own version,
`hoodie.write.table.version`), so one SparkSession serves every table. Where it comes from,
in order:

1. `TMS_HUDI_JARS`: jars named explicitly (a user's own classes go beside the bundle);
2. the bundle cache (`BundleSource.cache`, default `~/.cache/tms/hudi`), or the Maven local
   repository Maven fetched it into (`$TMS_MAVEN_CACHE`, else `~/.cache/tms/maven`);
3. fetched on first need the way Hudi's users get it: Spark's own package resolution
   (`spark-submit --packages`, which honours `spark.jars.repositories` and
   `spark.jars.ivySettings`, from the settings or Spark's `spark-defaults.conf`), else Maven
   when it is on PATH. One fetch at a time per cache, across processes (a lock file); the
   jar is checked and moved into place whole, so a fetch cut short leaves nothing behind.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tms.spark_runtime import ensure_java, spark_home

__all__ = [
    "HUDI_ARTIFACT",
    "HUDI_COORDINATES",
    "HUDI_GROUP",
    "HUDI_VERSION",
    "UNAVAILABLE_HINT",
    "BundleFetchError",
    "BundleFetcher",
    "BundleSource",
    "BundleStatus",
    "bundle_in_cache",
    "cached_bundle",
    "fetch_with_maven",
    "fetch_with_spark",
    "fetcher",
    "hudi_jars",
    "hudi_spark_conf",
    "maven_cache",
]

HUDI_GROUP = "org.apache.hudi"
HUDI_ARTIFACT = "hudi-spark3.5-bundle_2.12"
HUDI_VERSION = "1.2.0"
"""The Hudi release whose code the `hudi` executor runs, on tables of versions 6, 8 and 9."""
HUDI_COORDINATES = f"{HUDI_GROUP}:{HUDI_ARTIFACT}:{HUDI_VERSION}"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
FETCH_TIMEOUT = 1800.0
"""Seconds for one bundle's fetch (80 to 110 MB; seconds when the registry is near)."""
RETRY_AFTER_SECONDS = 600.0
"""A fetch that failed is not tried again in this process for this long."""
UNAVAILABLE_HINT = (
    "set TMS_HUDI_JARS to the path of Hudi's Spark bundle "
    f"({HUDI_ARTIFACT}-{HUDI_VERSION}.jar, from Maven Central), or let tms fetch it: "
    "TMS_HUDI_REPOSITORIES names a Maven mirror, TMS_HUDI_IVY_SETTINGS an Ivy settings file"
)
"""What a user does when the bundle cannot be had: said wherever it is missing."""


class BundleFetchError(RuntimeError):
    """The bundle could not be fetched; the message says why."""


@dataclass(frozen=True)
class BundleSource:
    """Where the bundle is kept and fetched from, when `TMS_HUDI_JARS` names none."""

    cache: Path | None = None
    """The bundle cache; None: `~/.cache/tms/hudi`."""
    repositories: str | None = None
    """`spark.jars.repositories` for the fetch: comma-separated Maven repositories (a mirror)."""
    ivy_settings: str | None = None
    """`spark.jars.ivySettings` for the fetch: an Ivy settings file (resolvers, credentials)."""
    fetch: bool = True
    """Whether a missing bundle is fetched at all (False: only `TMS_HUDI_JARS` or the cache)."""
    spark_home: Path | None = None
    """The Spark whose `spark-submit` resolves the package; None: the installed PySpark."""

    @property
    def folder(self) -> Path:
        return self.cache if self.cache is not None else Path.home() / ".cache/tms/hudi"


def maven_cache() -> Path:
    """The Maven local repository Maven fetches bundles into."""
    configured = os.environ.get("TMS_MAVEN_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache/tms/maven"


def bundle_in_cache(cache: Path | None = None, version: str = HUDI_VERSION) -> Path:
    """Where Maven puts the bundle of `version` in the Maven local repository `cache`."""
    folder = (cache or maven_cache()).joinpath(*HUDI_GROUP.split("."), HUDI_ARTIFACT, version)
    return folder / f"{HUDI_ARTIFACT}-{version}.jar"


def _bundle_file(source: BundleSource, version: str = HUDI_VERSION) -> Path:
    return source.folder / f"{HUDI_ARTIFACT}-{version}.jar"


def cached_bundle(source: BundleSource | None = None, version: str = HUDI_VERSION) -> Path | None:
    """The bundle in the bundle cache, else in the Maven local repository, else None."""
    for jar in (_bundle_file(source or BundleSource(), version), bundle_in_cache(None, version)):
        if jar.is_file():  # both fetchers move a whole, checked jar into place
            return jar
    return None


def hudi_jars(configured: str | None = None, source: BundleSource | None = None) -> list[str]:
    """The jars to put on a job's Spark: `configured` (comma-separated), else the cached
    bundle, else none (fetch it with `BundleFetcher`; the `hudi` executor refuses without)."""
    if configured and configured.strip():
        return [part.strip() for part in configured.split(",") if part.strip()]
    jar = cached_bundle(source)
    return [str(jar)] if jar is not None else []


def hudi_spark_conf(jars: list[str]) -> dict[str, str]:
    """The Spark configs of a session that runs Hudi's code: its jars, the Kryo serializer
    and registrator it requires, and the extension that parses its procedures' `CALL`."""
    if not jars:
        return {}
    return {
        "spark.jars": ",".join(jars),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    }


def _check_jar(jar: Path) -> None:
    """A whole bundle: a zip whose central directory (at its end) reads and names Hudi's
    classes. A download cut short fails here."""
    try:
        with zipfile.ZipFile(jar) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise BundleFetchError(f"the fetched {jar.name} is not a whole jar: {exc}") from None
    if not any(name.startswith("org/apache/hudi/") for name in names):
        raise BundleFetchError(f"the fetched {jar.name} holds no Hudi classes")


def _install(fetched: Path, target: Path) -> Path:
    """Copy a checked jar into the cache under a temporary name, then rename it into place."""
    _check_jar(fetched)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    shutil.copyfile(fetched, partial)
    os.replace(partial, target)
    return target


def _tail(text: str, lines: int = 12) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def fetch_with_spark(source: BundleSource, version: str = HUDI_VERSION) -> Path:
    """The bundle resolved by Spark's own package resolution (`spark-submit --packages`,
    Ivy, as Hudi's quick start adds it) and installed into the bundle cache."""
    home = spark_home(source.spark_home)
    submit = home / "bin" / "spark-submit"
    if not submit.is_file():
        raise BundleFetchError(f"no spark-submit at {submit} to resolve the bundle with")
    coordinates = f"{HUDI_GROUP}:{HUDI_ARTIFACT}:{version}"
    ivy = source.folder / "ivy"
    ensure_java()
    with tempfile.TemporaryDirectory(prefix="tms-hudi-fetch-") as scratch:
        noop = Path(scratch) / "resolved.py"
        noop.write_text("")  # the application: nothing to run once the package resolved
        argv = [
            str(submit),
            "--master",
            "local[1]",
            "--packages",
            coordinates,
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--conf",
            "spark.ui.enabled=false",
        ]
        if source.repositories:
            argv += ["--conf", f"spark.jars.repositories={source.repositories}"]
        if source.ivy_settings:
            argv += ["--conf", f"spark.jars.ivySettings={source.ivy_settings}"]
        argv.append(str(noop))
        env = dict(os.environ, SPARK_HOME=str(home))
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        done = _run(argv, env, coordinates, "Spark's package resolution")
    resolved = ivy / "jars" / f"{HUDI_GROUP}_{HUDI_ARTIFACT}-{version}.jar"
    if done.returncode != 0 or not resolved.is_file():
        raise BundleFetchError(
            f"Spark's package resolution could not fetch {coordinates} "
            f"(exit {done.returncode}):\n{_tail(done.stdout + done.stderr)}"
        )
    return _install(resolved, _bundle_file(source, version))


def fetch_with_maven(version: str = HUDI_VERSION, cache: Path | None = None) -> Path:
    """The bundle of `version` in the Maven local repository `cache`, fetched with Maven
    (from its default remote repository, or the mirror its settings name) unless there."""
    cache = cache or maven_cache()
    jar = bundle_in_cache(cache, version)
    if jar.is_file():  # Maven writes a download under a temporary name and renames it
        return jar
    coordinates = f"{HUDI_GROUP}:{HUDI_ARTIFACT}:{version}"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BundleFetchError(f"Maven (`mvn`) is not on PATH to fetch {coordinates} with")
    argv = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--strict-checksums",
        f"-Dmaven.repo.local={cache}",
        f"{DEPENDENCY_PLUGIN}:get",
        f"-Dartifact={coordinates}",
        "-Dtransitive=false",
    ]
    done = _run(argv, dict(os.environ), coordinates, "Maven")
    if done.returncode != 0 or not jar.is_file():
        raise BundleFetchError(
            f"Maven could not fetch {coordinates} (exit {done.returncode}):\n"
            + _tail(done.stdout + done.stderr)
        )
    return jar


def _run(
    argv: list[str], env: dict[str, str], coordinates: str, who: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            env=env,
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        seconds = f"{FETCH_TIMEOUT:.0f} s"
        raise BundleFetchError(f"{who} did not fetch {coordinates} in {seconds}") from None


@contextmanager
def _cache_lock(folder: Path) -> Iterator[None]:
    """One fetch at a time per cache, whichever process runs it (`tms serve`, a worker,
    `tms run`); a second one waits, then finds the jar there."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".fetch.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch(source: BundleSource, version: str = HUDI_VERSION) -> Path:
    """The bundle, from the cache or fetched: Spark's package resolution first, then Maven
    when it is on PATH. `BundleFetchError` with every way's reason when none worked."""
    with _cache_lock(source.folder):
        jar = cached_bundle(source, version)
        if jar is not None:
            return jar
        reasons = []
        try:
            return fetch_with_spark(source, version)
        except BundleFetchError as exc:
            reasons.append(str(exc))
        if shutil.which("mvn") is not None:
            try:
                return fetch_with_maven(version)  # into the Maven local repository
            except BundleFetchError as exc:
                reasons.append(str(exc))
        raise BundleFetchError("\n".join(reasons))


State = Literal["available", "absent", "fetching", "unavailable"]


@dataclass(frozen=True)
class BundleStatus:
    """Whether the `hudi` executor can run here, as `/readyz` and the logs say it."""

    state: State
    detail: str
    jars: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return self.state == "available"

    def to_dict(self) -> dict[str, str | bool]:
        return {"available": self.available, "state": self.state, "detail": self.detail}


FetchListener = Callable[[bool, float, str], None]
"""Told of each fetch this process made: (succeeded, seconds, the jar or the reason)."""


@dataclass
class BundleFetcher:
    """Obtains the bundle for this process: at most one fetch at a time, in a thread of its
    own so callers wait only as long as they choose; a failure is remembered and not tried
    again for `RETRY_AFTER_SECONDS`."""

    source: BundleSource
    listeners: list[FetchListener] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _failed: tuple[float, str] | None = field(default=None, repr=False)

    def status(self, configured: str | None = None) -> BundleStatus:
        jars = hudi_jars(configured, self.source)
        if jars:
            return BundleStatus("available", ", ".join(jars), tuple(jars))
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return BundleStatus("fetching", f"fetching {HUDI_COORDINATES}")
            failed = self._failed
        if failed is not None:
            return BundleStatus("unavailable", f"{failed[1].splitlines()[0]}; {UNAVAILABLE_HINT}")
        if not self.source.fetch:
            return BundleStatus("unavailable", f"fetching is off; {UNAVAILABLE_HINT}")
        return BundleStatus("absent", f"{HUDI_COORDINATES} is fetched on first need")

    def jars(self, configured: str | None = None, wait: float | None = None) -> list[str]:
        """The jars for a job's Spark: configured or cached, else fetched, waiting for the
        fetch at most `wait` seconds (None: until it ends); [] when there are none yet."""
        jars = hudi_jars(configured, self.source)
        if jars or not self.source.fetch:
            return jars
        thread = self.start()
        if thread is not None:
            thread.join(wait)
        return hudi_jars(configured, self.source)

    def start(self) -> threading.Thread | None:
        """The running fetch, started unless one runs or failed lately; None then."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return self._thread
            if self._failed is not None and self.clock() - self._failed[0] < RETRY_AFTER_SECONDS:
                return None
            self._thread = threading.Thread(
                target=self._fetch, name="tms-hudi-bundle-fetch", daemon=True
            )
            self._thread.start()
            return self._thread

    def _fetch(self) -> None:
        started = self.clock()
        try:
            jar = fetch(self.source)
        except Exception as exc:  # a reason for the status and the logs, never a dead thread
            reason = str(exc) or type(exc).__name__
            with self._lock:
                self._failed = (self.clock(), reason)
            self._tell(False, self.clock() - started, reason)
            return
        with self._lock:
            self._failed = None
        self._tell(True, self.clock() - started, str(jar))

    def _tell(self, succeeded: bool, seconds: float, what: str) -> None:
        for listener in list(self.listeners):
            listener(succeeded, seconds, what)


_FETCHERS: dict[BundleSource, BundleFetcher] = {}
_FETCHERS_LOCK = threading.Lock()


def fetcher(source: BundleSource, listener: FetchListener | None = None) -> BundleFetcher:
    """This process's fetcher for `source`: the service's engine, its `/readyz` and its
    resident workers' start share one, so the bundle is fetched once. `listener` is told of
    its fetches (once, however often it is passed)."""
    with _FETCHERS_LOCK:
        shared = _FETCHERS.setdefault(source, BundleFetcher(source))
        if listener is not None and listener not in shared.listeners:
            shared.listeners.append(listener)
        return shared


def main(argv: Sequence[str]) -> int:
    """`python -m tms.spark_runtime.hudi_bundle`: fetch the bundle the `hudi` executor runs
    into the default cache, ahead of first need."""
    if argv:
        print("usage: python -m tms.spark_runtime.hudi_bundle", file=sys.stderr)
        return 2
    try:
        jar = fetch(BundleSource())
    except BundleFetchError as exc:
        print(f"{exc}\n{UNAVAILABLE_HINT}", file=sys.stderr)
        return 1
    print(f"Hudi {HUDI_VERSION}: {jar} ({jar.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
