"""Hudi's timeline-server-based markers (`hoodie.write.markers.type=TIMELINE_SERVER_BASED`)
served for registered tables, with early conflict detection (RFC-56): `/v1/hoodie/marker/…`.

`state` keeps an instant's markers and writes them in batches as Hudi's server does,
`handler` the tables this instance serves (after Hudi's `MarkerHandler`), `ownership` and
`forward` the one instance that serves a table when several run, `server` what the routes
call.
"""

from tms.markers.forward import FORWARDED_HEADER, forward
from tms.markers.handler import MarkerHandler, ServedTable
from tms.markers.server import MarkerServer, MarkerTarget

__all__ = [
    "FORWARDED_HEADER",
    "MarkerHandler",
    "MarkerServer",
    "MarkerTarget",
    "ServedTable",
    "forward",
]
