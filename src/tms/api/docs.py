"""`/docs` without the internet: the Swagger UI's files come from the installed
`swagger-ui-bundle` package instead of a CDN, so the page works on isolated networks."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS_PATH", "DOCS_PATH", "install_docs"]

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    """Serve the Swagger UI at `/docs` over the app's OpenAPI document (the app must be
    created with `docs_url=None`)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
        )
