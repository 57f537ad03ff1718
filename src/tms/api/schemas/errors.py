"""The one error body every failure has, as OpenAPI documents it."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["ErrorDetail", "ErrorOut", "Problem"]


class Problem(BaseModel):
    """One problem of a request that failed validation."""

    field: str = Field(description="where: `body.<field>`, `query.<name>`, `path.<name>`")
    message: str
    type: str = Field(description="a stable kind, e.g. missing, string_too_long")


class ErrorDetail(BaseModel):
    code: str = Field(description="stable: unauthorized, not_found, validation_error, …")
    message: str
    field: str | None = Field(description="the offending field, when one is to blame")
    errors: list[Problem] | None = Field(None, description="validation errors: every problem found")


class ErrorOut(BaseModel):
    """`{"error": {"code", "message", "field"}}`."""

    error: ErrorDetail
