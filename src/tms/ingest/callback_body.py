"""Reading a commit callback's body in memory that stays a small multiple of its size.

A commit's write stats are most of its body (one per file written). Parsed whole, each
becomes objects several times its bytes (10.6 times, for a 48 MiB body of small stats). Here the
top-level object is read field by field, and the `hoodieWriteStat` array one element at a
time: each stat is validated, added to the commit's summary (`SummaryBuilder`) and dropped.
What stays is the body, its text, and an 8-byte digest per file touched.

Errors name fields as FastAPI names a body's (`body.hoodieWriteStat.3.numWrites`); a lone
surrogate escape is kept in its string for the field's own check to name, since JSON allows
it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from tms.ingest.commit_action import CommitSummary, SummaryBuilder
from tms.ingest.schema import CallbackIn, WriteStatIn

__all__ = ["ParsedCallback", "decode_body", "parse_callback"]

WRITE_STATS = "hoodieWriteStat"


class _NotJson(ValueError):
    """Not a JSON document (the message says where)."""


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_STAT = TypeAdapter(WriteStatIn)
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""A JSON string's value and the position after it, from the position after its quote."""


@dataclass(frozen=True)
class ParsedCallback:
    """The callback's fields (its write stats left out) and the summary of its stats."""

    body: CallbackIn
    summary: CommitSummary


def decode_body(chunks: list[bytes]) -> str:
    """The body's text from the chunks it arrived in, letting each copy go as the next is
    made (the chunks are emptied), so at most two copies exist at once."""
    raw = b"".join(chunks)
    chunks.clear()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(("body",), "json_invalid", "the body is not UTF-8") from None


def parse_callback(text: str, small_file_bytes: int | None = None) -> ParsedCallback:
    """The validated callback; `RequestValidationError` naming the field otherwise."""
    summary = SummaryBuilder(small_file_bytes)
    try:
        fields = _Reader(text, summary).document()
    except _NotJson as exc:
        raise _invalid(("body",), "json_invalid", f"the body is not JSON: {exc}") from None
    try:
        body = CallbackIn.model_validate(fields)
    except ValidationError as exc:
        raise RequestValidationError(_in_body(exc, ())) from None
    return ParsedCallback(body, summary.build())


class _Reader:
    """The top-level object of `text`, its write stats summed into `summary` as they come."""

    def __init__(self, text: str, summary: SummaryBuilder) -> None:
        self.text = text
        self.summary = summary

    def document(self) -> dict[str, Any]:
        pos = self._skip(0)
        if not self.text.startswith("{", pos):
            raise _NotJson(f"expected an object at {pos}")
        fields: dict[str, Any] = {}
        pos = self._skip(pos + 1)
        if self.text.startswith("}", pos):
            return self._end(fields, pos + 1)
        while True:
            if not self.text.startswith('"', pos):
                raise _NotJson(f"expected a field name at {pos}")
            try:
                key, pos = _scanstring(self.text, pos + 1)
            except json.JSONDecodeError as exc:
                raise _NotJson(exc.msg) from None
            pos = self._skip(pos)
            if not self.text.startswith(":", pos):
                raise _NotJson(f"expected ':' at {pos}")
            pos = self._skip(pos + 1)
            if key == WRITE_STATS and self.text.startswith("[", pos):
                pos = self._write_stats(pos)
                fields[key] = []
            else:
                fields[key], pos = self._value(pos)
            pos = self._skip(pos)
            if self.text.startswith(",", pos):
                pos = self._skip(pos + 1)
            elif self.text.startswith("}", pos):
                return self._end(fields, pos + 1)
            else:
                raise _NotJson(f"expected ',' or '}}' at {pos}")

    def _write_stats(self, pos: int) -> int:
        pos = self._skip(pos + 1)
        if self.text.startswith("]", pos):
            return pos + 1
        index = 0
        while True:
            value, pos = self._value(pos)
            try:
                stat = _STAT.validate_python(value)
            except ValidationError as exc:
                raise RequestValidationError(_in_body(exc, (WRITE_STATS, index))) from None
            self.summary.add(stat)
            index += 1
            pos = self._skip(pos)
            if self.text.startswith(",", pos):
                pos = self._skip(pos + 1)
            elif self.text.startswith("]", pos):
                return pos + 1
            else:
                raise _NotJson(f"expected ',' or ']' at {pos}")

    def _value(self, pos: int) -> tuple[Any, int]:
        try:
            value, end = _DECODER.raw_decode(self.text, pos)
        except json.JSONDecodeError as exc:
            raise _NotJson(exc.msg) from None
        return value, end

    def _skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return match.end() if match else pos

    def _end(self, fields: dict[str, Any], pos: int) -> dict[str, Any]:
        if self._skip(pos) != len(self.text):
            raise _NotJson(f"extra data at {self._skip(pos)}")
        return fields


def _in_body(exc: ValidationError, prefix: tuple[str | int, ...]) -> list[dict[str, Any]]:
    return [
        {**error, "loc": ("body", *prefix, *error["loc"])}
        for error in exc.errors(include_url=False)
    ]


def _invalid(loc: tuple[str, ...], kind: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": kind, "loc": loc, "msg": message, "input": None}])
