"""The refusal every HTTP endpoint raises and the one JSON error body it becomes.

Low enough for both the API and commit ingest to import; `tms.api.errors` maps these (and
store and validation errors) to responses.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "error_body"]


class ApiError(Exception):
    """An error the API returns on purpose: status, stable code, message, offending field."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers

    @classmethod
    def invalid(cls, field: str, message: str) -> ApiError:
        return cls(422, "validation_error", f"{field}: {message}", field=field)

    @classmethod
    def not_found(cls, message: str) -> ApiError:
        return cls(404, "not_found", message)

    @classmethod
    def conflict(cls, code: str, message: str) -> ApiError:
        return cls(409, code, message)


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """`{"error": {"code", "message", "field", …}}`."""
    return {"error": {"code": code, "message": message, "field": field, **extra}}
