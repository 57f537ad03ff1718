"""Zip archives on `sys.path` are read again at `importlib.invalidate_caches()` only when
they changed (`tms.spark_runtime.zip_directories`), which PySpark's worker calls before every
task."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms.spark_runtime.zip_directories import read_zip_directories_once

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 13), reason="Python 3.13 reads archives lazily: nothing to change"
)


def write_zip(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in modules.items():
            archive.writestr(f"{name}.py", text)


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "tasks.zip"
    write_zip(path, {"zd_first": "VALUE = 1\n"})
    sys.path.insert(0, str(path))
    yield path
    sys.path.remove(str(path))
    sys.path_importer_cache.pop(str(path), None)
    for name in ("zd_first", "zd_second"):
        sys.modules.pop(name, None)


def test_an_unchanged_archive_is_not_read_again_and_a_changed_one_is(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert importlib.import_module("zd_first").VALUE == 1
    read_zip_directories_once()
    read_zip_directories_once()  # idempotent
    reads: list[str] = []
    original = zipimport._read_directory  # type: ignore[attr-defined]

    def counted(path: str) -> object:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(zipimport, "_read_directory", counted)
    importlib.invalidate_caches()  # read once: when it was read before is not known
    assert reads.count(str(archive)) == 1
    reads.clear()
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    assert str(archive) not in reads

    write_zip(archive, {"zd_first": "VALUE = 1\n", "zd_second": "VALUE = 2\n"})
    importlib.invalidate_caches()
    assert reads.count(str(archive)) == 1
    assert importlib.import_module("zd_second").VALUE == 2
