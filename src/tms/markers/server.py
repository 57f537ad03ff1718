"""What the marker routes call: the table a request's marker folder names, who serves it,
and this instance's `MarkerHandler`.

A marker folder is `<basePath>/.hoodie/.temp/<instant>` (Hudi's `getMarkerFolderPath`); its
base path must name a registered table, compared as the store normalizes base paths.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request
from starlette.responses import Response

from tms.base_path import BasePathError
from tms.blocking_calls import BlockingCalls
from tms.config import Settings
from tms.http.errors import ApiError
from tms.hudi.timeline.instant import is_instant_time
from tms.markers.forward import FORWARDED_HEADER, OwnerUnavailable, forward
from tms.markers.handler import MarkerHandler, MarkerLimits, ServedTable
from tms.markers.ownership import MarkerOwnership, Owner
from tms.markers.refusals import refused
from tms.store import find_table_by_base_path, instant_planned_here, normalize_base_path

__all__ = ["MarkerServer", "MarkerTarget", "split_marker_dir"]

TEMP_SUFFIX = "/.hoodie/.temp/"
REGISTERED_SECONDS = 5.0


@dataclass(frozen=True)
class MarkerTarget:
    table: ServedTable
    instant_time: str


def split_marker_dir(value: str) -> tuple[str, str]:
    """(base path, instant) of `<basePath>/.hoodie/.temp/<instant>`."""
    base, sep, instant = value.rstrip("/").rpartition(TEMP_SUFFIX)
    if not sep or not base:
        raise ApiError.invalid("markerdirpath", "must be <basePath>/.hoodie/.temp/<instant>")
    if not is_instant_time(instant):
        raise ApiError.invalid("markerdirpath", f"{instant!r} is not an instant time")
    return base, instant


class MarkerServer:
    """Marker requests of one instance: target resolution, ownership, the handler."""

    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        engine: Engine,
        storage_calls: BlockingCalls,
    ) -> None:
        """`storage_calls`: the instance's bounded, timed storage threads that requests use."""
        self._factory = session_factory
        self._registered_at: dict[str, tuple[ServedTable, float]] = {}
        self.handler = MarkerHandler(
            batch_files=settings.marker_batch_files,
            batch_interval_seconds=settings.marker_batch_interval_ms / 1000.0,
            heartbeat_tolerance=settings.marker_heartbeat_tolerance_seconds,
            storage_calls=storage_calls,
            limits=MarkerLimits(
                name_chars=settings.marker_name_max_chars,
                per_instant=settings.markers_per_instant_max,
                instants_per_table=settings.marker_instants_per_table_max,
            ),
        )
        self.ownership = MarkerOwnership(engine, settings.api_url)

    async def target(self, marker_dir: str, base_path: str | None = None) -> MarkerTarget:
        """The registered table and instant of a marker folder; `basepath`, when sent,
        must name the same table (422 otherwise, 404 for no registered table)."""
        raw_base, instant = split_marker_dir(marker_dir)
        try:
            normalized = normalize_base_path(raw_base)
        except BasePathError as exc:
            raise ApiError.invalid("markerdirpath", str(exc)) from None
        if base_path is not None:
            try:
                same = normalize_base_path(base_path) == normalized
            except BasePathError as exc:
                raise ApiError.invalid("basepath", str(exc)) from None
            if not same:
                raise ApiError.invalid("basepath", "names another table than markerdirpath")
        table = await asyncio.to_thread(self._registered, normalized)
        if table is None:
            raise ApiError(
                404,
                "not_found",
                f"markerdirpath: no registered table has base path {normalized}",
                field="markerdirpath",
            )
        return MarkerTarget(table, instant)

    async def owner(self, target: MarkerTarget) -> Owner:
        owner = await asyncio.to_thread(self.ownership.owner, target.table.base_path)
        lost = self.ownership.take_lost()
        if lost:  # on the event loop, where the handler's state is changed
            self.handler.drop_tables(lost)
        return owner

    async def elsewhere(self, request: Request, target: MarkerTarget) -> Response | None:
        """The owner's answer when another instance serves the table; None when this one
        does. An owner that does not answer is looked up once more (it may have stopped,
        and this instance may take the table now)."""
        owner = await self.owner(target)
        if owner.local:
            return None
        try:
            return await forward(request, owner.address)
        except OwnerUnavailable:
            if request.headers.get(FORWARDED_HEADER):
                raise
        self.ownership.forget_owner(target.table.base_path)
        owner = await self.owner(target)
        return None if owner.local else await forward(request, owner.address)

    async def admit(self, target: MarkerTarget) -> None:
        """Refuse (409 `marker_refused`) a marker for an instant that is not pending on the
        table's timeline, or that tms runs: its markers come only from tms's own jobs, and
        reconciliation must never see one a client sent. A writer's admitted instant is
        remembered while its markers are held; for a table service's instant (which tms may
        be handed at any time) who runs it is asked on every marker."""
        key = (target.table.base_path, target.instant_time)
        table_service = self.handler.admitted(key)
        if table_service is False:
            return
        if await asyncio.to_thread(self._planned_here, *key):
            raise refused(
                "planned_by_tms",
                f"instant {target.instant_time} is a table service tms runs; its markers come "
                "only from tms's own jobs",
            )
        if table_service is None:
            instant = await self.handler.pending_instant(target.table, target.instant_time)
            if instant is None:
                raise refused(
                    "instant_not_pending",
                    f"instant {target.instant_time} is not requested or inflight on the "
                    "table's timeline",
                )
            await self.handler.admit(target.table, instant)

    def close(self) -> None:
        self.ownership.close()

    def _planned_here(self, base_path: str, instant_time: str) -> bool:
        with self._factory() as session:
            return instant_planned_here(session, base_path, instant_time)

    def _registered(self, base_path: str) -> ServedTable | None:
        """The registered table (a found one trusted for `REGISTERED_SECONDS`: a Spark stage
        asks about one table for each of its files)."""
        now = time.monotonic()
        known = self._registered_at.get(base_path)
        if known is not None and now - known[1] < REGISTERED_SECONDS:
            return known[0]
        with self._factory() as session:
            found = find_table_by_base_path(session, base_path)
            if found is None:
                self._registered_at.pop(base_path, None)
                return None
            table = ServedTable(found.base_path, dict(found.storage_options or {}))
        self._registered_at[base_path] = (table, now)
        return table
