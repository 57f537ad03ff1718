"""Classes of a user's own that Hudi tables name (a payload class, …), compiled from
`tests/hudi_java/user_classes/` against a Hudi release's bundle into a jar, which the
release's Spark session then carries, as a user's session carries theirs."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

__all__ = ["LARGEST_VALUE_PAYLOAD", "user_classes_jar"]

SOURCES = Path(__file__).with_name("user_classes")
LARGEST_VALUE_PAYLOAD = "tms.tests.LargestValuePayload"
"""Of two versions of a record, keeps the one with the larger `val`."""


def user_classes_jar(bundle: Path, workdir: Path) -> Path:
    """The classes compiled with `javac` against `bundle` and Spark's own jars (Avro, Kryo),
    in `workdir/user-classes.jar`."""
    import pyspark

    classes = workdir / "user-classes"
    classes.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    spark_jars = Path(pyspark.__file__).parent / "jars" / "*"
    classpath = os.pathsep.join([str(bundle), str(spark_jars)])
    compiled = subprocess.run(
        ["javac", "--release", "8", "-nowarn", "-cp", classpath, "-d", str(classes), *sources],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if compiled.returncode != 0:
        raise RuntimeError(f"javac failed:\n{compiled.stdout}{compiled.stderr}")
    jar = workdir / "user-classes.jar"
    with zipfile.ZipFile(jar, "w") as out:
        for path in sorted(classes.rglob("*.class")):
            out.write(path, path.relative_to(classes).as_posix())
    return jar
