"""The `tms` package as a zip for `--py-files`: executors on a cluster import our task code
(and the job driver may run on a host without `tms` installed)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

__all__ = ["package_zip"]

_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def _package_files(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and not (_SKIP_DIRS & set(path.parts))
            and path.suffix not in _SKIP_SUFFIXES
        ):
            files.append(path)
    return files


_TMS_PACKAGE = Path(__file__).resolve().parents[1]
"""The `tms` package's folder: this module is `tms/spark_runtime/package.py`."""


def package_zip(dest_dir: Path, package_dir: Path | None = None) -> Path:
    """Zip the package into `dest_dir/tms-<content hash>.zip`, once per content.

    The name carries a hash of the sources, so a service upgraded in place never ships an
    old zip, and concurrent builders write the same file (atomically, via rename).
    """
    if package_dir is None:
        package_dir = _TMS_PACKAGE
    files = _package_files(package_dir)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(package_dir)).encode())
        digest.update(path.read_bytes())
    target = dest_dir / f"{package_dir.name}-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest_dir, suffix=".zip.tmp")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, Path(package_dir.name) / path.relative_to(package_dir))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
