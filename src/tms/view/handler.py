"""Answers one request of Hudi's remote file-system view, as Hudi's `RequestHandler` does.

The `basepath` must name a registered table. Before a call that checks freshness (Hudi's
`performRefreshCheck`, unless `refreshoff=true`) the view is synced when the client's
`timelinehash` differs from the view's or its `lastinstantts` is not on the view's
timeline; a view still behind afterwards is refused with 400, as Hudi refuses it (except
when the view's only extra instant is a clean), so the client falls back to reading
storage itself.

What a client sends cannot make the service list storage at its pace: the syncs clients
ask for (a newer or unknown `lastinstantts`/`timelinehash`, `refresh`, `inittimeline`)
run at most once per table per `sync_interval`, unless the last one found the timeline
changed: a writer's timeline moves several times a second (an inline compaction is
requested, then inflight, then committed), and each move it tells of is real, so it is
synced to at once, as Hudi's server would. Syncs of a table run one at a time, and a request
that comes while one runs waits for it and is answered from what it found (a writer's tasks
ask in parallel). A client asking again later within the interval is answered from the view
as it is, or refused as behind: a bogus `lastinstantts` on every request costs one
listing per interval plus one per real change of the table, not one per request.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from tms import metrics
from tms.http.errors import ApiError
from tms.hudi.errors import HudiError
from tms.hudi.timeline.instant import Action
from tms.store import Tbl, find_table_by_base_path, list_operations
from tms.view.cache import CachedTable, Outcome, TableRef, ViewCache
from tms.view.dto import DtoWriter
from tms.view.endpoints import (
    BASEPATH,
    ENDPOINTS,
    LAST_INSTANT_TS,
    REFRESH_OFF,
    TIMELINE_HASH,
    BadParameter,
    Endpoint,
    MissingParameter,
    Params,
    check_values,
)
from tms.view.snapshot import Snapshot
from tms.view.visible_timeline import INVALID_INSTANT_TS, contains_or_before_start, timeline_hash

__all__ = ["ViewAnswer", "ViewHandler", "table_ref"]

log = logging.getLogger(__name__)

_FRESHNESS_PARAMS = frozenset({LAST_INSTANT_TS, TIMELINE_HASH, REFRESH_OFF, "pretty"})
"""Parameters that do not change an answer (left out of the memo's key)."""
_SYNCING_POSTS = frozenset({"refresh", "inittimeline"})
REF_TTL_SECONDS = 0.5
"""How long a table's row (registration and newest-commit token) read for one request serves
the next ones. Freshness towards a client does not depend on it: the client's timeline hash
makes a behind view sync before it answers, as in Hudi; the row only advances the view
early, and reading it at most twice a second per table keeps busy tables off the database."""
SYNC_INTERVAL_SECONDS = 1.0
"""Least time between two syncs of one table that clients ask for (the default of
`TMS_VIEW_SYNC_INTERVAL_SECONDS`)."""


@dataclass(frozen=True)
class ViewAnswer:
    body: bytes
    endpoint: str
    cache: str


PLANS_WATCHED = 8
"""Latest operations of a table whose instants and states tell the view a plan appeared."""


def table_ref(session: Session, table: Tbl) -> TableRef:
    """The table's row and its latest operations, as the view compares them."""
    seen = table.last_commit_seen_at
    operations = list_operations(session, tbl_id=table.id, limit=PLANS_WATCHED)
    return TableRef(
        id=table.id,
        base_path=table.base_path,
        storage_options=dict(table.storage_options or {}),
        token=seen.isoformat() if seen is not None else "",
        plans=",".join(f"{o.id}:{o.instant or ''}:{o.status.value}" for o in operations),
    )


def _alternatives(base_path: str) -> list[str]:
    """Hadoop's S3 scheme spellings name the same bucket as `s3://`."""
    for scheme in ("s3a://", "s3n://"):
        if base_path.startswith(scheme):
            return [base_path, "s3://" + base_path[len(scheme) :]]
    return [base_path]


class ViewHandler:
    def __init__(
        self,
        cache: ViewCache,
        ref_ttl: float = REF_TTL_SECONDS,
        *,
        sync_interval: float = SYNC_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` (monotonic seconds) times `ref_ttl` and `sync_interval`."""
        self.cache = cache
        self.ref_ttl = ref_ttl
        self.sync_interval = sync_interval
        self.clock = clock
        self._refs: dict[str, tuple[float, TableRef]] = {}
        self._refs_lock = threading.Lock()

    def find_table(self, session: Session, base_path: str, *, fresh: bool = False) -> TableRef:
        """The registered table `base_path` names (its row read at most every `ref_ttl`,
        unless `fresh`)."""
        now = self.clock()
        with self._refs_lock:
            known = self._refs.get(base_path)
        if not fresh and known is not None and now - known[0] < self.ref_ttl:
            return known[1]
        for spelling in _alternatives(base_path):
            table = find_table_by_base_path(session, spelling)
            if table is not None:
                ref = table_ref(session, table)
                with self._refs_lock:
                    if len(self._refs) > 4 * self.cache.max_tables:
                        self._refs.clear()
                    self._refs[base_path] = (now, ref)
                return ref
        raise ApiError(
            404,
            "not_found",
            f"basepath: {base_path!r} is not a registered table",
            field=BASEPATH,
        )

    def endpoint(self, path: str, method: str) -> Endpoint:
        endpoint = ENDPOINTS.get(path.strip("/"))
        if endpoint is None or endpoint.method != method:
            raise ApiError(404, "not_found", f"no {method} endpoint /v1/hoodie/view/{path}")
        return endpoint

    def answer(
        self, sessions: Callable[[], Session], path: str, method: str, query: Mapping[str, str]
    ) -> ViewAnswer:
        """The answer to one call; `sessions` opens the short database sessions that look
        the table up (none is held while storage is read)."""
        endpoint = self.endpoint(path, method)
        params = Params(query)
        try:
            check_values(query)
            base_path = params.required(BASEPATH)
            if not base_path:
                raise MissingParameter(BASEPATH)
        except BadParameter as bad:
            raise _invalid(bad) from None
        with sessions() as session:
            ref = self.find_table(session, base_path)

        def sync(cached: CachedTable, needed: Callable[[], bool] | None = None) -> None:
            """Load the view again (unless a client had it synced within `sync_interval`);
            the row read first says which commits it then holds. One sync of a table at a
            time: a writer's tasks ask in parallel, and a request that waited for another's
            sync syncs only if that one did not bring what it `needed`."""
            with cached.sync_lock:
                if needed is not None and not needed():
                    return
                if not self._may_sync(cached):
                    return
                with sessions() as session:
                    fresh = self.find_table(session, base_path, fresh=True)
                before = cached.timeline.instants
                self.cache.advance(
                    cached, fresh.token, outcome, reason="synced", plans=fresh.plans, force=True
                )
                cached.sync_found_change = cached.timeline.instants != before

        outcome = Outcome()
        try:
            cached = self.cache.get(ref, outcome)
            body = self._answer(cached, endpoint, path.strip("/"), params, base_path, sync)
            if outcome.cache != "miss":
                metrics.VIEW_LISTINGS_SAVED.inc(endpoint.covered(cached.snapshot, params))
        except BadParameter as bad:
            raise _invalid(bad) from None
        except (OSError, HudiError) as exc:
            log.warning("view of %s: storage failed: %s", ref.base_path, exc)
            self.cache.drop(ref.id)
            raise ApiError(502, "storage_error", "the table's storage could not be read") from None
        finally:
            metrics.VIEW_STORAGE_LISTINGS.inc(outcome.listings)
        metrics.VIEW_REQUESTS.labels(endpoint.name, outcome.cache).inc()
        return ViewAnswer(body, endpoint.name, outcome.cache)

    def _may_sync(self, cached: CachedTable) -> bool:
        """True, and the table's sync time set, when no client-asked sync of it began
        within `sync_interval`, or the last one found the timeline changed (it may then
        have changed again: a real change allows one more sync)."""
        now = self.clock()
        with self._refs_lock:
            last = cached.synced_at
            recent = last is not None and now - last < self.sync_interval
            if recent and not cached.sync_found_change:
                return False
            cached.synced_at = now
            cached.sync_found_change = False
            return True

    def _answer(
        self,
        cached: CachedTable,
        endpoint: Endpoint,
        path: str,
        params: Params,
        base_path: str,
        sync: Callable[[CachedTable, Callable[[], bool] | None], None],
    ) -> bytes:
        if endpoint.method == "POST" and path in _SYNCING_POSTS:
            sync(cached, None)
        check = endpoint.refresh_check and params.optional(REFRESH_OFF).lower() != "true"
        if check and _behind(cached.snapshot, params):
            sync(cached, lambda: _behind(cached.snapshot, params))
        snapshot = cached.snapshot
        if check and _behind(snapshot, params) and _should_refuse(snapshot, params):
            client_last = params.optional(LAST_INSTANT_TS, INVALID_INSTANT_TS)
            log.info(
                "view of %s: %s refused as behind: client's last instant %s, hash %s; "
                "view's last %s, hash %s",
                base_path,
                path,
                client_last,
                params.optional(TIMELINE_HASH),
                snapshot.last_instant,
                snapshot.hash,
            )
            raise ApiError(
                400,
                "client_view_behind",
                f"Last known instant from client was {client_last} "
                f"but server has the following timeline {[str(i) for i in snapshot.visible]}",
                field=TIMELINE_HASH,
            )
        key = (
            path,
            base_path,
            tuple(sorted((k, v) for k, v in params.values.items() if k not in _FRESHNESS_PARAMS)),
        )
        body = snapshot.memo(key) if endpoint.method == "GET" else None
        if body is None:
            result: Any = endpoint.answer(snapshot, DtoWriter(snapshot, base_path), params)
            body = json.dumps(result, separators=(",", ":")).encode()
            if endpoint.method == "GET":
                snapshot.remember(key, body)
        return body


def _invalid(bad: BadParameter) -> ApiError:
    return ApiError(400, "validation_error", str(bad), field=bad.name)


def _behind(snapshot: Snapshot, params: Params) -> bool:
    """`RequestHandler.isLocalViewBehind`."""
    client_last = params.optional(LAST_INSTANT_TS, INVALID_INSTANT_TS)
    if not snapshot.visible and client_last == INVALID_INSTANT_TS:
        return False
    if snapshot.hash != params.optional(TIMELINE_HASH):
        return True
    return not contains_or_before_start(snapshot.visible, client_last)


def _should_refuse(snapshot: Snapshot, params: Params) -> bool:
    """`shouldThrowExceptionIfLocalViewBehind`: not when the view's last instant is a clean
    and the client's timeline is the view's without it."""
    last = snapshot.last_instant
    if last is None or last.action is not Action.CLEAN:
        return True
    before = [i for i in snapshot.visible if i.requested_time < last.requested_time]
    return timeline_hash(before) != params.optional(TIMELINE_HASH)
