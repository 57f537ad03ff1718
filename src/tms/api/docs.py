"""`/docs` without the internet: the Swagger UI's files come from the installed
`fastapi-offline` package instead of a CDN, so the page works on isolated networks. Its
Swagger UI is 5.x, the first major version that renders OpenAPI 3.1 documents such as ours
(4.x says the document "does not specify a valid version field")."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_PATH", "DOCS_PATH", "SWAGGER_UI_DIR", "install_docs"]

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
SWAGGER_UI_DIR = Path(str(files("fastapi_offline") / "static"))
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png, as `fastapi-offline` ships them."""


def install_docs(app: FastAPI) -> None:
    """Serve the Swagger UI at `/docs` over the app's OpenAPI document (the app must be
    created with `docs_url=None`)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=SWAGGER_UI_DIR), name="swagger-ui")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
        )
