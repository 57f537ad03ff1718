"""Time zone names of Hudi's timestamp key generator settings, as the zones they stand for.

Hudi turns a setting into a zone with `DateTimeZone.forTimeZone(TimeZone.getTimeZone(name))`.
Java understands `UTC`/`GMT`, custom offsets `GMT+H`, `GMT+HH`, `GMT+H:MM`, `GMT+HH:MM`,
`GMT+HMM`, `GMT+HHMM` (and `-`), and the tz database's region names; any other name silently
becomes GMT, and three-letter names (`EST`, `CST`, ...) mean different zones to Java and Joda.
So region names that the tz database knows and the forms above are translated, everything else
is refused.
"""

from __future__ import annotations

import functools
import re
import zoneinfo

from tms.hudi.errors import UnsupportedTableError

__all__ = ["time_zone"]

_UTC_NAMES = frozenset({"UTC", "GMT"})
_CUSTOM = re.compile(r"GMT([+-])([0-9]+)(?::([0-9]+))?", re.ASCII)
_REGION = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)+", re.ASCII)


def time_zone(name: str, key: str) -> str:
    """The zone `name` (the value of setting `key`) stands for, as pyarrow names it."""
    if name in _UTC_NAMES:
        return "UTC"
    offset = _custom_offset(name)
    if offset is not None:
        return offset
    if _REGION.fullmatch(name) and name in _regions():
        return name
    raise UnsupportedTableError(
        f"time zone {key}={name!r} is not translated: use a tz database region name such as"
        " Asia/Shanghai, UTC, or an offset such as GMT+08:00"
    )


def _custom_offset(name: str) -> str | None:
    """`TimeZone.parseCustomTimeZone`: `GMT`, a sign, then `H[H]:MM`, or digits read as hours
    when two or fewer and as hours and minutes (`HMM`, `HHMM`) when more."""
    custom = _CUSTOM.fullmatch(name)
    if custom is None:
        return None
    sign, digits, after = custom.groups()
    if after is None:
        number = int(digits)
        hours, minutes = (number, 0) if len(digits) <= 2 else divmod(number, 100)
    elif len(digits) <= 2 and len(after) == 2:
        hours, minutes = int(digits), int(after)
    else:
        return None
    if hours > 23 or minutes > 59:
        return None
    return f"{sign}{hours:02d}:{minutes:02d}"


@functools.cache
def _regions() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())
