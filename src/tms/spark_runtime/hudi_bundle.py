"""Apache Hudi's Spark bundle on a job's Spark, for Hudi's own table-service code (the `hudi`
executor): which jar, and the Spark configs Hudi needs beside it.

The bundle is Hudi's release `HUDI_VERSION` for Spark 3.5 and Scala 2.12, a Maven artifact:
`TMS_HUDI_JARS` names jars explicitly, else the bundle is looked for in the Maven local
repository tms fetches it into (`$TMS_MAVEN_CACHE`, else `~/.cache/tms/maven`). One release
serves table versions 6, 8 and 9: it writes each at its own version
(`hoodie.write.table.version`), so one SparkSession serves every table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "HUDI_ARTIFACT",
    "HUDI_GROUP",
    "HUDI_VERSION",
    "BundleFetchError",
    "bundle_in_cache",
    "fetch",
    "hudi_jars",
    "hudi_spark_conf",
    "maven_cache",
]

HUDI_GROUP = "org.apache.hudi"
HUDI_ARTIFACT = "hudi-spark3.5-bundle_2.12"
HUDI_VERSION = "1.2.0"
"""The Hudi release whose code the `hudi` executor runs, on tables of versions 6, 8 and 9."""
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
FETCH_TIMEOUT = 1800.0
"""Seconds for one bundle's fetch (80 to 110 MB; seconds when the registry is near)."""


class BundleFetchError(RuntimeError):
    """Maven could not fetch a bundle; the message says why."""


def maven_cache() -> Path:
    """The Maven local repository bundles are fetched into."""
    configured = os.environ.get("TMS_MAVEN_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache/tms/maven"


def bundle_in_cache(cache: Path | None = None, version: str = HUDI_VERSION) -> Path:
    """Where Maven puts the bundle of `version` in `cache`."""
    folder = (cache or maven_cache()).joinpath(*HUDI_GROUP.split("."), HUDI_ARTIFACT, version)
    return folder / f"{HUDI_ARTIFACT}-{version}.jar"


def hudi_jars(configured: str | None = None) -> list[str]:
    """The jars to put on a job's Spark: `configured` (comma-separated), else the bundle in
    the Maven cache when it is there, else none (the `hudi` executor then refuses)."""
    if configured and configured.strip():
        return [part.strip() for part in configured.split(",") if part.strip()]
    jar = bundle_in_cache()
    return [str(jar)] if jar.is_file() else []


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


def fetch(version: str = HUDI_VERSION, cache: Path | None = None) -> Path:
    """The bundle of `version` in the Maven cache, fetched with Maven (from its default
    remote repository) unless it is there."""
    cache = cache or maven_cache()
    jar = bundle_in_cache(cache, version)
    if jar.is_file():  # Maven writes a download under a temporary name and renames it
        return jar
    coordinates = f"{HUDI_GROUP}:{HUDI_ARTIFACT}:{version}"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BundleFetchError(
            f"Maven (`mvn`) is needed to fetch {coordinates} into {cache}, and is not on PATH: "
            "install it (Debian: apt-get install maven)"
        )
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--strict-checksums",
        f"-Dmaven.repo.local={cache}",
        f"{DEPENDENCY_PLUGIN}:get",
        f"-Dartifact={coordinates}",
        "-Dtransitive=false",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=FETCH_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        timeout = f"{FETCH_TIMEOUT:.0f} s"
        raise BundleFetchError(f"Maven did not fetch {coordinates} in {timeout}") from None
    if done.returncode != 0 or not jar.is_file():
        output = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise BundleFetchError(
            f"Maven could not fetch {coordinates} (exit {done.returncode}):\n" + "\n".join(output)
        )
    return jar


def main(argv: Sequence[str]) -> int:
    """`python -m tms.spark_runtime.hudi_bundle`: fetch the bundle the `hudi` executor runs."""
    if argv:
        print("usage: python -m tms.spark_runtime.hudi_bundle", file=sys.stderr)
        return 2
    try:
        jar = fetch()
    except BundleFetchError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"Hudi {HUDI_VERSION}: {jar} ({jar.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
