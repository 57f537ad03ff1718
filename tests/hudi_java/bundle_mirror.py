"""A site's Maven mirror on local disk holding Hudi's Spark bundle, and an Ivy settings file
whose only resolver it is: what a user without Maven Central points tms at
(`TMS_HUDI_IVY_SETTINGS`), so a fetch into an empty cache is tested without the network."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.hudi_java.support import HUDI_1_2, fetch
from tms.spark_runtime.hudi_bundle import HUDI_ARTIFACT, HUDI_GROUP, HUDI_VERSION

POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>{HUDI_GROUP}</groupId>
  <artifactId>{HUDI_ARTIFACT}</artifactId>
  <version>{HUDI_VERSION}</version>
</project>
"""


def make_mirror(root: Path) -> Path:
    """A Maven repository at `root` holding the bundle (the tests' own copy) and its pom."""
    folder = root.joinpath(*HUDI_GROUP.split("."), HUDI_ARTIFACT, HUDI_VERSION)
    folder.mkdir(parents=True)
    shutil.copyfile(fetch(HUDI_1_2), folder / f"{HUDI_ARTIFACT}-{HUDI_VERSION}.jar")
    (folder / f"{HUDI_ARTIFACT}-{HUDI_VERSION}.pom").write_text(POM)
    return root


def ivy_settings(path: Path, root: Path) -> Path:
    """An Ivy settings file whose only resolver is the Maven repository at `root`."""
    path.write_text(
        "<ivysettings>\n"
        '  <settings defaultResolver="mirror"/>\n'
        "  <resolvers>\n"
        f'    <ibiblio name="mirror" m2compatible="true" root="{root.as_uri()}"/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n"
    )
    return path
