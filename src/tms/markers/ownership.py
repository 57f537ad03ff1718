"""Which instance serves a table's markers (`tms.store.marker_owners`): this one takes a
table it is asked about when no other holds it; otherwise it learns the owner's address.

Requests for a table another instance owns are forwarded there (`tms.markers.forward`):
Hudi's client (Apache HttpClient's default redirect strategy) follows a 307 for GET only,
and marker creation is a POST.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from tms.store import marker_owners

__all__ = ["LOCAL", "MarkerOwnership", "Owner"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """Who serves a table: this instance (`local`), or another at `address` ("" while the
    owner's address cannot be read)."""

    local: bool
    address: str = ""


LOCAL = Owner(True)


class MarkerOwnership:
    """This instance's marker locks, on one connection advertising `address`.

    The connection is checked at most every `check_seconds` while tables are served from
    memory: an owner whose connection broke serves that long at most before it notices,
    drops what it held (`take_lost`) and asks the database again.
    """

    def __init__(self, engine: Engine, address: str, *, check_seconds: float = 1.0) -> None:
        self._engine = engine
        self._address = address
        self._lost: set[str] = set()
        self._check_seconds = check_seconds
        self._mutex = threading.Lock()
        self._connection: Connection | None = None
        self._owned: dict[int, str] = {}
        self._others: dict[int, tuple[str, float]] = {}
        """Owners found elsewhere, trusted for `check_seconds` (a forwarded marker then
        costs no query here)."""
        self._checked = 0.0
        self.shared = len(address.encode("utf-8")) <= marker_owners.ADDRESS_MAX_BYTES
        """Whether ownership is shared through the database at all."""
        if not self.shared:
            log.error(
                "public_url %r is longer than %d bytes: it cannot be advertised to other "
                "instances, so this instance serves every table's markers itself; run one "
                "instance, or give it a shorter public_url",
                address,
                marker_owners.ADDRESS_MAX_BYTES,
            )

    def owner(self, base_path: str) -> Owner:
        """Who serves `base_path`'s markers, taking it when nobody does (blocking)."""
        if not self.shared:
            return LOCAL
        key = marker_owners.marker_key(base_path)
        with self._mutex:
            other = self._others.get(key)
            if other is not None and time.monotonic() - other[1] < self._check_seconds:
                return Owner(False, other[0])
            connection = self._alive_connection()
            if key in self._owned:
                return LOCAL
            for _ in range(2):  # the owner may let go between our two statements
                if marker_owners.try_own(connection, key):
                    self._others.pop(key, None)
                    self._owned[key] = base_path
                    log.info("serving the markers of %s", base_path)
                    return LOCAL
                address = marker_owners.owner_address(connection, key)
                if address is not None:
                    self._others[key] = (address, time.monotonic())
                    return Owner(False, address)
            return Owner(False, "")

    def forget_owner(self, base_path: str) -> None:
        """Ask the database again next time (the owner last found did not answer)."""
        with self._mutex:
            self._others.pop(marker_owners.marker_key(base_path), None)

    def take_lost(self) -> set[str]:
        """Tables whose locks went with a broken connection since the last call: their
        in-memory state must go, since another instance may serve them now."""
        with self._mutex:
            lost, self._lost = self._lost, set()
            return lost

    def close(self) -> None:
        """Let every table go (closing the connection frees its locks)."""
        with self._mutex:
            self._owned.clear()
            if self._connection is not None:
                # out of the pool for good: a pooled connection would keep its locks
                self._connection.invalidate()
                self._connection.close()
                self._connection = None

    def _alive_connection(self) -> Connection:
        now = time.monotonic()
        connection = self._connection
        if connection is not None and now - self._checked < self._check_seconds:
            return connection
        if connection is not None and marker_owners.is_alive(connection):
            self._checked = now
            return connection
        if connection is not None:
            self._lost |= set(self._owned.values())
            self._owned.clear()
            connection.invalidate()
            log.warning("the marker owner connection broke; its tables are served anew")
        self._connection = marker_owners.open_owner_connection(self._engine, self._address)
        self._checked = now
        return self._connection
