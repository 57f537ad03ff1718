"""One spelling per table location, and the check that a location is one we may open.

A base path arrives from operators, writers' callbacks and Hudi's client in many spellings
(`file:///x/y`, `/x//y/`, `/x/./y`, `/x/z/../y`); they name one table, so they are reduced
to one form before anything stores or compares them. Local paths become plain absolute
paths; other locations become `scheme://authority/path`. Chained fsspec URLs (`a::b`),
relative paths and `..` above the root are refused: they name no single location.

On local (and mounted) storage a spelling may also lead elsewhere through a symlink
(`/lake/sales/link` -> `/lake/hr/payroll`): where a path is checked against a scope and
stored, it is taken with its symlinks followed (`follow_links`), so a scope covers the
folders a path really reaches and one folder is one table. Object-store URIs have no links.

It imports nothing of ours: the settings (their allowed prefixes), the store (the spelling it
stores), the table lock (its key) and the API (a caller's scopes) all read one spelling.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "BasePathError",
    "Location",
    "check_base_path",
    "normalize_base_path",
    "parse",
    "resolve_base_path",
    "within",
]

LOCAL_SCHEME = "file"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)
_LOCAL_HOSTS = ("", "localhost")
_DEFAULT_AUTHORITY_SCHEMES = frozenset({"hdfs"})
"""Schemes whose `scheme:///path` means the cluster's default file system."""


class BasePathError(ValueError):
    """A base path that is not a usable table location; the message says why."""


@dataclass(frozen=True)
class Location:
    """A normalized base path taken apart: `parts` are its path components."""

    scheme: str
    authority: str
    parts: tuple[str, ...]

    def __str__(self) -> str:
        path = "/" + "/".join(self.parts)
        if self.scheme == LOCAL_SCHEME:
            return path
        return f"{self.scheme}://{self.authority}{path if self.parts else ''}"

    @property
    def local(self) -> bool:
        """On this machine's file system (a plain path or a `file:` URL)."""
        return self.scheme == LOCAL_SCHEME

    def is_below(self, prefix: Location) -> bool:
        """Strictly inside `prefix`, compared on whole path components."""
        return (
            (self.scheme, self.authority) == (prefix.scheme, prefix.authority)
            and len(self.parts) > len(prefix.parts)
            and self.parts[: len(prefix.parts)] == prefix.parts
        )


def parse(raw: str) -> Location:
    """The location `raw` names; raises `BasePathError` when it names none."""
    text = raw.strip()
    if not text:
        raise BasePathError("is empty")
    if "::" in text:
        raise BasePathError("chained URLs (::) are not allowed")
    match = _SCHEME.match(text)
    if match is None:
        if not text.startswith("/"):
            raise BasePathError("is not an absolute path")
        return Location(LOCAL_SCHEME, "", _components(text))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == LOCAL_SCHEME:
        return _local_url(rest)
    if not rest.startswith("//"):
        raise BasePathError(f"expected {scheme}://authority/path")
    authority, _, path = rest[2:].partition("/")
    if not authority and scheme not in _DEFAULT_AUTHORITY_SCHEMES:
        raise BasePathError(f"{scheme}:// needs a bucket, container or host")
    if any(c in text for c in "?#"):
        raise BasePathError("a query (?) or fragment (#) is not allowed")
    return Location(scheme, authority, _components("/" + path))


def within(base_path: str, prefix: str, *, follow_links: bool = False) -> bool:
    """True when `base_path` is `prefix` or below it, compared on whole path components of
    both normalized (so `/lake/sales` covers neither `/lake/sales2` nor `/lake/sales/../hr`);
    a path that names no location is within nothing. With `follow_links`, a local `prefix`
    is taken with its symlinks followed, as `base_path` was (`resolve_base_path`); this
    reads the file system."""
    try:
        path, scope = parse(base_path), parse(prefix)
    except BasePathError:
        return False
    if follow_links and path.local:
        scope = _followed(scope)
    return path == scope or path.is_below(scope)


def normalize_base_path(raw: str) -> str:
    """The one spelling of the location `raw` names; raises `BasePathError`."""
    return str(parse(raw))


def resolve_base_path(raw: str) -> str:
    """The one spelling of the folder `raw` leads to: a local path with its symlinks
    followed (a part that does not exist yet is kept as spelled), any other location
    normalized only. Reads the file system; raises `BasePathError`."""
    return str(_followed(parse(raw)))


def check_base_path(
    raw: str, *, schemes: Iterable[str], prefixes: Iterable[str], follow_links: bool = False
) -> str:
    """`raw` normalized, if its scheme is in `schemes` and, when `prefixes` lists any of
    its scheme, it lies strictly below one of them; raises `BasePathError` saying why.
    With `follow_links`, a local path and the local prefixes are compared, and the path
    returned, with their symlinks followed (this reads the file system).

    Local paths have the scheme `file`; `/` as a prefix admits every local path but `/`.
    """
    location = parse(raw)
    allowed = sorted({s.strip().lower() for s in schemes})
    if location.scheme not in allowed:
        shown = ", ".join(allowed) or "none"
        raise BasePathError(f"the scheme {location.scheme!r} is not allowed (allowed: {shown})")
    follow = follow_links and location.local
    if follow:
        location = _followed(location)
    own = [p for p in map(parse, prefixes) if p.scheme == location.scheme]
    scopes = [_followed(p) for p in own] if follow else own
    if own and not any(location.is_below(p) for p in scopes):
        shown = ", ".join(sorted(map(str, own)))  # as configured, not where they lead
        raise BasePathError(f"is outside the allowed prefixes ({shown})")
    return str(location)


def _followed(location: Location) -> Location:
    """A local location with its symlinks followed; others as they are."""
    if not location.local:
        return location
    return Location(LOCAL_SCHEME, "", _components(os.path.realpath(str(location))))


def _local_url(rest: str) -> Location:
    """`file:/x`, `file:///x` and `file://localhost/x`; a file URL naming another host is
    not a local path."""
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in _LOCAL_HOSTS:
            raise BasePathError(f"file URLs of another host ({host}) are not allowed")
        rest = slash + path
    if not rest.startswith("/"):
        raise BasePathError("is not an absolute path")
    return Location(LOCAL_SCHEME, "", _components(rest))


def _components(path: str) -> tuple[str, ...]:
    """`.`, empty components and `..` resolved lexically; `..` above the root is refused."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise BasePathError("'..' climbs above the root")
            parts.pop()
            continue
        parts.append(part)
    return tuple(parts)
