"""Field types shared by the request models, with the checks that keep bad input out of
PostgreSQL (NUL bytes, invalid Unicode, out-of-range integers) and the normalisations Hudi
clients need.

Every text field of a request is `Text` or a type built on it: JSON may carry a lone
surrogate (`"\\ud800"`), which Python decodes but no UTF-8 encoder (PostgreSQL's, the
response's) accepts, so it is refused at the boundary with a 422 naming the field.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from tms.executor_choice import ExecutorChoice, parse_executor
from tms.http.fields import (
    BasePath,
    Identifier,
    Instant,
    Label,
    Text,
    check_instant,
    check_json_text,
    check_text,
    check_unicode,
)
from tms.hudi.actions import action_named
from tms.store import ServiceAction

__all__ = [
    "MAX_ID",
    "BasePath",
    "Count",
    "Engine",
    "Executor",
    "ExtraParams",
    "Identifier",
    "Instant",
    "Label",
    "Lenient",
    "Parallelism",
    "Priority",
    "Resource",
    "Strict",
    "Text",
    "check_instant",
    "check_json_text",
    "check_text",
    "check_unicode",
    "normalize_engine",
    "normalize_resource",
    "parse_action",
    "parse_extra_params",
    "parse_parallelism",
]

MAX_ID = 2**63 - 1
# Spark memory: a number with an optional unit (b, k, m, g, t, p, optionally followed by b).
_MEMORY = re.compile(r"^([0-9]{1,9})([kmgtp]b?|b)?$")
_MAX_EXTRA_PARAMS = 200
_MAX_EXTRA_BYTES = 64 * 1024


class Strict(BaseModel):
    """Operator API bodies: unknown fields are refused, so a typo is an error, not a no-op."""

    model_config = ConfigDict(extra="forbid")


class Lenient(BaseModel):
    """Bodies Hudi and RFC-43 clients send: unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")


def normalize_resource(value: str) -> str:
    """`driver:executor` memory as Spark understands it: `4g:4g`; also accepts Hudi's client
    default `spark:4g,4g`, `spark:4g` and a single `4g` for both."""
    text = value.strip().lower().replace(" ", "")
    if text.startswith("spark:"):
        text = text.removeprefix("spark:").replace(",", ":")
    parts = text.split(":")
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or not all(_valid_memory(p) for p in parts):
        raise ValueError(
            "expected driver:executor memory such as 4g:4g (also spark:4g,4g or 4g), "
            "with sizes like 512m, 4g or 1t"
        )
    return ":".join(parts)


def _valid_memory(part: str) -> bool:
    match = _MEMORY.match(part)
    return match is not None and int(match.group(1)) > 0


ENGINES = ("spark", "spark-submit", "spark-worker")
"""`spark`: a resident worker when one serves the queue, else spark-submit."""


def normalize_engine(value: str) -> str:
    engine = value.strip().lower()
    if engine not in ENGINES:
        raise ValueError(
            f"unknown execution engine {value.strip()!r}: use spark (a worker when one serves "
            "the queue, else spark-submit), spark-submit or spark-worker"
        )
    return engine


def _params_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return check_text(str(value))
    if isinstance(value, list) and all(isinstance(v, str) and "," not in v for v in value):
        return check_text(",".join(value))  # names, as the comma-separated text they mean
    raise ValueError(
        f"{key}: values must be strings, numbers, booleans or lists of names without commas"
    )


def parse_extra_params(value: Any) -> dict[str, str]:
    """Extra Spark settings as a flat `{key: string}`: from a JSON object, or Hudi client's
    `k1=v1;k2=v2` string (its documented separator is `;`)."""
    if value is None or value == "":
        return {}
    check_json_text(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                raise ValueError("not a JSON object") from None
        else:
            pairs: dict[str, str] = {}
            for item in filter(None, (part.strip() for part in text.split(";"))):
                key, sep, val = item.partition("=")
                if not sep or not key.strip():
                    raise ValueError(f"expected key=value pairs separated by ';', got {item!r}")
                pairs[key.strip()] = val.strip()
            value = pairs
    if not isinstance(value, dict):
        raise ValueError("expected an object of key: value")
    if len(value) > _MAX_EXTRA_PARAMS:
        raise ValueError(f"at most {_MAX_EXTRA_PARAMS} entries")
    result = {check_text(str(k)): _params_value(str(k), v) for k, v in value.items()}
    if any(not k for k in result):
        raise ValueError("keys must not be empty")
    if len(json.dumps(result)) > _MAX_EXTRA_BYTES:
        raise ValueError(f"at most {_MAX_EXTRA_BYTES} bytes")
    return result


def parse_action(value: str) -> ServiceAction:
    """An action by its value, case-insensitive; RFC-43's path words are aliases."""
    name = action_named(value)
    if name is None:
        names = ", ".join(a.value for a in ServiceAction)
        raise ValueError(f"unknown action; expected one of {names}")
    return ServiceAction(name)


_SIZE = r"[1-9][0-9]{0,8}([kmgtp]b?|b)?"
RESOURCE_PATTERN = f"^(spark:{_SIZE}(,{_SIZE})?|{_SIZE}(:{_SIZE})?)$"
"""The spellings of `driver:executor` memory the document names (lower case, no spaces:
the check also takes upper case, spaces and leading zeros)."""
Resource = Annotated[
    Text,
    Field(max_length=64, json_schema_extra={"pattern": RESOURCE_PATTERN}),
    AfterValidator(normalize_resource),
]
ExtraParams = Annotated[dict[str, str], BeforeValidator(parse_extra_params)]
Engine = Annotated[
    Text, Field(json_schema_extra={"enum": list(ENGINES)}), AfterValidator(normalize_engine)
]
"""Execution engines (case-insensitive; the document lists them in lower case): `spark`,
`spark-submit`, `spark-worker`."""
Executor = Annotated[
    ExecutorChoice,
    BeforeValidator(parse_executor),
    Field(
        description="who runs the plans: native (tms's own Spark tasks), hudi (Apache Hudi's "
        "table-service code) or auto (native where it supports the table, else hudi)",
    ),
]
"""Executor choices (`tms.executor_choice`, case-insensitive): `auto`, `native`, `hudi`."""

MAX_PARALLELISM = 100_000
_WHOLE = re.compile(r"[+-]?[0-9]+")
_NOT_WHOLE = "expected a whole number of tasks such as 1000, as an integer or a string of digits"


def parse_parallelism(value: Any) -> Any:
    """RFC-43's design writes `parallelism` as a string (`"1000"`), so a string of ASCII
    digits is the number; integers are range-checked alike, and other types (`true`, 1.5)
    go on to the strict integer check."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return value
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PydanticCustomError(
                "int_parsing", "must not be blank (leave it out for the engine's own)"
            )
        if not _WHOLE.fullmatch(text):
            raise PydanticCustomError("int_parsing", _NOT_WHOLE)
        # Twelve digits are out of range already: more need not be read.
        digits = text.lstrip("+-").lstrip("0")[:12] or "0"
        value = -int(digits) if text.startswith("-") else int(digits)
    if value < 1:
        raise PydanticCustomError("greater_than_equal", "must be at least 1")
    if value > MAX_PARALLELISM:
        raise PydanticCustomError(
            "less_than_equal", "must be at most {maximum}", {"maximum": MAX_PARALLELISM}
        )
    return value


Parallelism = Annotated[
    StrictInt,
    BeforeValidator(parse_parallelism),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_PARALLELISM},
                {"type": "string", "pattern": r"^\s*\+?0*([1-9][0-9]{0,4}|100000)\s*$"},
            ]
        }
    ),
]
"""Tasks of a job's Spark stages, 1 to 100000: an integer, or RFC-43's string of digits."""
Priority = Annotated[StrictInt, Field(ge=-1_000_000, le=1_000_000)]
Count = Annotated[StrictInt, Field(ge=0, le=1_000_000)]
"""Numbers of request bodies are strict: `true` is not 1 (nor `"5"` 5); a float field takes
integers too. `Parallelism` alone also takes digits in a string, as RFC-43 writes it."""
