"""The operator console: static files shipped in the package (`tms/api/console/`), served
at `/ui` without authentication (they hold no data: the page asks the API for everything,
with the token the operator enters). Only the named files are served, never a path."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, Response

from tms.api.errors import ApiError

router = APIRouter(prefix="/ui", include_in_schema=False)

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
"""Every file the console has, with its content type: the allow-list of `/ui/{asset}`."""

HEADERS = {
    # Scripts and styles from these files only; API calls to this origin only.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _read(name: str) -> bytes:
    return files("tms.api").joinpath("console", name).read_bytes()


def _asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ApiError.not_found("no such file in the console")
    return Response(_read(name), media_type=media_type, headers=HEADERS)


@router.get("")
@router.get("/")
def console_page() -> Response:
    """The console's single page (it routes by the URL's fragment: `/ui#/tables`)."""
    return _asset("index.html")


@router.get("/{asset}")
def console_asset(asset: str) -> Response:
    """`app.js` or `style.css`; anything else is 404."""
    return _asset(asset)
