"""The embedded PostgreSQL of the default set-up: the server a data directory shares
(`server`), the processes a killed postmaster leaves behind (`orphans`), and the thread that
keeps the server of `tms serve` running (`supervisor`). The store sees only its URL, and
creates the service's database on it (`store.create_database`)."""

from tms.embedded_postgres.server import EmbeddedPostgres, EmbeddedPostgresError, start_embedded
from tms.embedded_postgres.supervisor import (
    BACKOFF_MAX_SECONDS,
    EmbeddedSupervisor,
    SupervisorStatus,
    restart_delay,
)

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "EmbeddedSupervisor",
    "SupervisorStatus",
    "restart_delay",
    "start_embedded",
]
