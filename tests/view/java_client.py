"""Requests as Hudi's `RemoteHoodieTableFileSystemView` sends them, and the client's side of
the freshness protocol computed independently of `tms` from the instant files' names.

The client's URL is `URIBuilder` over the path constant (some with a trailing '/'), its
parameters (`basepath`, `partition`, …) and then `lastinstantts` (the last instant of its
timeline, when it has one) and `timelinehash`; Apache HttpClient's fluent `Request.Get/Post`
adds the headers below. The client's timeline is `getActiveTimeline()
.filterCompletedAndCompactionInstants()`: each instant in its furthest state, completed ones
and pending compactions, ordered by time, then comparable action, then state; its hash is
SHA-256 over `ts_action_STATE` (`BaseHoodieTimeline`).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.testclient import TestClient

HEADERS = {
    "User-Agent": "Apache-HttpClient/4.5.13 (Java/1.8.0_392)",
    "Accept-Encoding": "gzip,deflate",
    "Connection": "Keep-Alive",
}
_COMPLETED_V2 = re.compile(r"^(\d+)_(\d+)\.([a-z]+)$")
_OTHER = re.compile(r"^(\d+)\.(?:([a-z]+)\.)?(requested|inflight)$|^(\d+)\.([a-z]+)$")
_COMPARABLE = {
    "compaction": "commit",
    "logcompaction": "deltacommit",
    "clustering": "replacecommit",
}
_STATES = ("REQUESTED", "INFLIGHT", "COMPLETED")
_KNOWN = {
    "commit", "deltacommit", "compaction", "logcompaction", "replacecommit", "clustering",
    "clean", "rollback", "savepoint", "restore", "indexing", "schemacommit",
}  # fmt: skip


def client_instants(base: Path) -> list[tuple[str, str, str]]:
    """(time, action, STATE) of the client's view timeline."""
    folder = base / ".hoodie" / "timeline"
    if not folder.is_dir():
        folder = base / ".hoodie"
    furthest: dict[tuple[str, str], tuple[str, str, str]] = {}
    for path in folder.iterdir():
        if not path.is_file():
            continue
        name = path.name
        done = _COMPLETED_V2.match(name)
        other = _OTHER.match(name)
        if done:
            ts, action, state = done.group(1), done.group(3), "COMPLETED"
        elif other and other.group(3):
            ts, action, state = other.group(1), other.group(2) or "commit", other.group(3).upper()
        elif other and other.group(4):
            ts, action, state = other.group(4), other.group(5), "COMPLETED"
        else:
            continue
        if action not in _KNOWN:
            continue
        key = (ts, _COMPARABLE.get(action, action))
        current = furthest.get(key)
        if current is None or _STATES.index(state) > _STATES.index(current[2]):
            furthest[key] = (ts, action, state)
    kept = [
        i
        for i in furthest.values()
        if i[2] == "COMPLETED" or i[1] in ("compaction", "logcompaction")
    ]
    return sorted(kept, key=lambda i: (i[0], _COMPARABLE.get(i[1], i[1]), _STATES.index(i[2])))


def client_hash(instants: list[tuple[str, str, str]]) -> str:
    digest = hashlib.sha256()
    for ts, action, state in instants:
        digest.update(f"{ts}_{action}_{state}".encode())
    return digest.hexdigest()


class JavaViewClient:
    """One writer's remote view of one table, over a `TestClient`."""

    def __init__(self, http: TestClient, base_path: str, local: Path) -> None:
        self.http = http
        self.base_path = base_path
        self.local = local
        self.reload()

    def reload(self) -> None:
        """`metaClient.reloadActiveTimeline()`: the client sees the table as it is now."""
        self.instants = client_instants(self.local)

    def url(self, path: str, params: dict[str, str]) -> str:
        query = {"basepath": self.base_path, **params}
        if self.instants:
            query["lastinstantts"] = self.instants[-1][0]
        query["timelinehash"] = client_hash(self.instants)
        return f"/v1/hoodie/view/{path}?{urlencode(query)}"

    def call(self, path: str, method: str = "GET", **params: str) -> Any:
        response = self.http.request(method, self.url(path, params), headers=HEADERS)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    def raw(self, path: str, method: str = "GET", **params: str) -> Any:
        return self.http.request(method, self.url(path, params), headers=HEADERS)

    # The calls a writer makes, named as RemoteHoodieTableFileSystemView names them.

    def get_latest_file_slices(self, partition: str) -> Any:
        return self.call("slices/partition/latest/", partition=partition)

    def get_latest_base_files(self, partition: str) -> Any:
        return self.call("datafiles/latest/partition", partition=partition)

    def get_timeline(self) -> Any:
        return self.call("timeline/instants/all")

    def refresh(self) -> Any:
        self.reload()
        return self.call("refresh/", method="POST")
