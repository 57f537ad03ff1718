"""Which clients the open timeline-server routes answer: those in
`timeline_server_allowed_networks` (loopback and private ranges by default).

Hudi's clients send no credentials there, so the network is the only gate an operator has;
it is checked before any other work. The client is the peer of the connection (uvicorn's
`--forwarded-allow-ips` decides whether a proxy's `X-Forwarded-For` replaces it).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from starlette.requests import Request

from tms.config import Settings
from tms.http.errors import ApiError

__all__ = ["check_client_network"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def check_client_network(request: Request, settings: Settings) -> None:
    """403 unless the client's address lies in an allowed network."""
    host = request.client.host if request.client is not None else None
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    allowed = _networks(settings.timeline_server_allowed_networks)
    if address is None or not any(address in network for network in allowed):
        raise ApiError(
            403,
            "forbidden",
            "the timeline-server routes do not answer this client's network "
            "(timeline_server_allowed_networks)",
        )
