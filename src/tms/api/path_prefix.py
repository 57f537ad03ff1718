"""Whether a table's base path lies under a prefix, compared on path components.

A string prefix test would let `/lake/sales` cover `/lake/sales2` and `/lake/sales/../hr`;
both paths are normalized first (`posixpath.normpath`, so `..` and `.` are resolved and
repeated slashes collapse) and compared component by component, with the URL scheme and
authority (`s3://bucket`) compared whole. `file:///x` is the local path `/x`.

Kept local and small until base paths are normalized in one shared place; `within` is the
one function the callers use.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

__all__ = ["within"]

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/]*)(?P<path>.*)$")


class _Location(NamedTuple):
    scheme: str
    authority: str
    parts: tuple[str, ...]
    absolute: bool


def _location(path: str) -> _Location:
    scheme, authority = "", ""
    match = _URL.match(path.strip())
    if match:
        scheme, authority = match["scheme"].lower(), match["authority"]
        path = match["path"] or "/"
        if scheme == "file" and authority in {"", "localhost"}:
            scheme, authority = "", ""
    absolute = path.startswith("/") or bool(scheme)
    normalized = posixpath.normpath(path) if path else "."
    parts = tuple(part for part in normalized.split("/") if part and part != ".")
    return _Location(scheme, authority, parts, absolute)


def within(base_path: str, prefix: str) -> bool:
    """True when `base_path` is `prefix` or below it, after normalizing both."""
    path, scope = _location(base_path), _location(prefix)
    if not (path.absolute and scope.absolute):
        return False
    if (path.scheme, path.authority) != (scope.scheme, scope.authority):
        return False
    return path.parts[: len(scope.parts)] == scope.parts
