"""Validated text fields of HTTP requests, shared by the API's schemas and commit ingest.

Text must be valid Unicode (PostgreSQL stores UTF-8), names carry no control characters,
and an instant is Hudi's 17 (or 14) digit time.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

__all__ = [
    "BASE_PATH_PATTERN",
    "NAME_PATTERN",
    "BasePath",
    "Identifier",
    "Instant",
    "Label",
    "Text",
    "check_instant",
    "check_json_text",
    "check_text",
    "check_unicode",
    "strip_text",
]

_INSTANT = re.compile(r"^[0-9]{14}([0-9]{3}([0-9]{3})?)?$")
"""A Hudi instant time: 17 digits (14 before Hudi 0.10), or, on a version 6 table's
metadata table, 17 and Hudi's 3-digit suffix (a compaction there is `<delta commit>001`)."""
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_PRINTABLE = r"[^\u0000-\u001F\u007F]"

NAME_PATTERN = f"^{_PRINTABLE}*[^\\s\\u0000-\\u001F\\u007F]{_PRINTABLE}*$"
"""What the OpenAPI document promises of a name: no control characters, not blank. A
schema, not a check: names are also taken with spaces around them or control characters
at their ends (stripped), which the document leaves out."""
BASE_PATH_PATTERN = f"^(/|[A-Za-z][A-Za-z0-9+.-]*://){_PRINTABLE}*$"
"""What the document promises of a base path: an absolute path or a URL, without control
characters. Which schemes and prefixes are allowed is the deployment's (422 otherwise)."""
_INVALID_UNICODE = "must be valid Unicode text (a lone surrogate such as \\ud800 is not)"


def check_unicode(value: str) -> str:
    """Text that UTF-8 can encode: no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(_INVALID_UNICODE) from None
    return value


def check_json_text(value: Any) -> Any:
    """A JSON value (object, list, scalars) whose keys and strings are all valid Unicode;
    walked with a stack, so deep nesting cannot exhaust the recursion limit."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            check_unicode(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


def check_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; control characters in names are always a mistake."""
    check_unicode(value)
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def strip_text(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def check_instant(value: str) -> str:
    if not _INSTANT.match(value):
        raise ValueError(
            "expected a Hudi instant time: 17 digits yyyyMMddHHmmssSSS (or 14; 20 for a "
            "metadata table's instant with its suffix)"
        )
    return value


Text = Annotated[str, AfterValidator(check_unicode)]
"""Any text of a request (bodies and query parameters): valid Unicode."""
Identifier = Annotated[
    Text,
    BeforeValidator(strip_text),
    Field(min_length=1, max_length=255, json_schema_extra={"pattern": NAME_PATTERN}),
    AfterValidator(check_text),
]
"""Database and table names."""
Label = Annotated[
    Text,
    BeforeValidator(strip_text),
    Field(min_length=1, max_length=255, json_schema_extra={"pattern": NAME_PATTERN}),
    AfterValidator(check_text),
]
"""Owners and queues."""
BasePath = Annotated[
    Text,
    BeforeValidator(strip_text),
    Field(min_length=1, max_length=4096, json_schema_extra={"pattern": BASE_PATH_PATTERN}),
    AfterValidator(check_text),
]
Instant = Annotated[
    Text,
    BeforeValidator(strip_text),
    AfterValidator(check_instant),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": _INSTANT.pattern,
            "description": "a Hudi instant time: 17 digits yyyyMMddHHmmssSSS (or 14; 20 for a "
            "metadata table's instant with its suffix)",
        }
    ),
]
