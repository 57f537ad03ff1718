"""Partition paths of Hudi's timestamp-based key generator (`TimestampBasedAvroKeyGenerator`).

The partition field's value is read as an instant and printed with
`hoodie.keygen.timebased.output.dateformat` (a Joda pattern) in the output time zone:

- `UNIX_TIMESTAMP`, `EPOCHMILLISECONDS`, `EPOCHMICROSECONDS`, `SCALAR` (in
  `...timestamp.scalar.time.unit`, default SECONDS): an integer count of that unit since the
  epoch, converted to milliseconds as `TimeUnit.convert` does (finer units truncate toward
  zero). A date field counts its epoch day in that unit (`LocalDate.toEpochDay()`).
- `DATE_STRING`, `MIXED`: a string parsed with the first of `...input.dateformat` (a list split
  by `...input.dateformat.list.delimiter.regex`, default `,`) that reads all of it, in the input
  time zone.
- A null value is replaced first (`getDefaultPartitionVal`): the number 1 for the numeric types;
  for the string types, the instant 1 ms after the epoch printed with the first input format in
  the input zone (else the output zone, else GMT), which is then parsed like any value.

Time zones: `...timezone` sets both; else `...input.timezone` and `...output.timezone`, each
empty meaning the writing JVM's default zone. What depends on that zone is refused: numbers
without an output zone, and strings parsed without an input zone while an output zone is set
(strings with neither zone keep their local fields, whatever the JVM's zone).

These settings are in `hoodie.properties` when Hudi persisted them (`HoodieTableConfig.
PERSISTED_CONFIG_LIST`, written for the timestamp key generator's tables), under
`hoodie.keygen.timebased.*` or the older `hoodie.deltastreamer.keygen.timebased.*`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import TableConfig
from tms.hudi.record_keys.joda import Pattern, local_fields
from tms.hudi.record_keys.values import DEFAULT_PARTITION_PATH, chunked
from tms.hudi.record_keys.zones import time_zone

__all__ = ["TimestampPartitioning", "TimestampType", "timestamp_partitioning"]

PREFIX = "hoodie.keygen.timebased."
OLD_PREFIX = "hoodie.deltastreamer.keygen.timebased."
DATE_TIME_PARSER = "hoodie.keygen.datetime.parser.class"
OLD_DATE_TIME_PARSER = "hoodie.deltastreamer.keygen.datetime.parser.class"
HOODIE_DATE_TIME_PARSER = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"


class TimestampType(StrEnum):
    """`TimestampBasedAvroKeyGenerator.TimestampType`."""

    UNIX_TIMESTAMP = "UNIX_TIMESTAMP"
    DATE_STRING = "DATE_STRING"
    MIXED = "MIXED"
    EPOCHMILLISECONDS = "EPOCHMILLISECONDS"
    EPOCHMICROSECONDS = "EPOCHMICROSECONDS"
    SCALAR = "SCALAR"

    @property
    def parses_strings(self) -> bool:
        return self in (TimestampType.DATE_STRING, TimestampType.MIXED)


_UNIT_OF_TYPE = {
    TimestampType.UNIX_TIMESTAMP: "SECONDS",
    TimestampType.EPOCHMILLISECONDS: "MILLISECONDS",
    TimestampType.EPOCHMICROSECONDS: "MICROSECONDS",
}
_MILLIS_PER_UNIT = {"MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000, "SECONDS": 1000}
_UNITS_PER_MILLI = {"MILLISECONDS": 1, "MICROSECONDS": 1000, "NANOSECONDS": 1_000_000}


@dataclass(frozen=True)
class TimestampPartitioning:
    """How the timestamp-based key generator turns a field's value into a partition path."""

    timestamp_type: TimestampType
    output: Pattern
    output_zone: str
    unit: str = "SECONDS"
    """`TimeUnit` of the numeric types."""
    inputs: tuple[Pattern, ...] = ()
    default_input: Pattern | None = None
    """The first input format, untrimmed, which prints the default of a null string."""
    input_zone: str = "UTC"
    default_zone: str = "UTC"

    def check_type(self, field: str, kind: pa.DataType) -> None:
        """Refuse a field type whose value Hudi does not read as this instant type, or reads
        depending on settings the table does not record."""
        if self.timestamp_type.parses_strings:
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                return
            wanted = "a string"
        else:
            if pa.types.is_integer(kind) or pa.types.is_date(kind):
                return
            wanted = "an integer or a date"
        raise UnsupportedTableError(
            f"timestamp partition field {field!r} has type {kind}; a {self.timestamp_type}"
            f" partition path is computed from {wanted} (timestamps depend on"
            " hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled, which"
            " the table does not record)"
        )

    def paths(self, column: pa.ChunkedArray, field: str) -> pa.ChunkedArray:
        """`TimestampBasedAvroKeyGenerator.getPartitionPath(Object)` of every value, before
        URL encoding and hive-style naming."""
        self.check_type(field, column.type)
        if self.timestamp_type.parses_strings:
            return self._parsed(column)
        return self.output.print(local_fields(self._millis(column), self.output_zone), len(column))

    def _millis(self, column: pa.ChunkedArray) -> pa.ChunkedArray:
        """`convertLongTimeToMillis`, nulls first replaced by 1."""
        if pa.types.is_date(column.type):
            column = column.cast(pa.date32()).cast(pa.int32())
        values = pc.fill_null(column.cast(pa.int64()), 1)
        try:
            if self.unit in _MILLIS_PER_UNIT:
                return chunked(pc.multiply_checked(values, _MILLIS_PER_UNIT[self.unit]))
            return chunked(_truncated_division(values, _UNITS_PER_MILLI[self.unit]))
        except pa.ArrowInvalid as error:
            raise ValueError(f"a {self.unit} value out of the range of instants: {error}") from None

    def _parsed(self, column: pa.ChunkedArray) -> pa.ChunkedArray:
        """Strings parsed with the input formats, in the input zone, then printed."""
        strings = column.cast(pa.string())
        default = self._default_string()
        blank = pc.or_kleene(pc.is_null(strings), pc.equal(strings, DEFAULT_PARTITION_PATH))
        strings = pc.if_else(pc.fill_null(blank, True), default, strings)
        distinct = pc.unique(strings)
        moments = pa.array([self._parse(v) for v in distinct.to_pylist()], pa.timestamp("ms"))
        try:
            instants = pc.assume_timezone(
                moments, self.input_zone, ambiguous="earliest", nonexistent="raise"
            )
        except pa.ArrowInvalid as error:
            raise ValueError(f"a date string names a time the input zone skips: {error}") from None
        millis = chunked(instants.cast(pa.int64()))
        printed = self.output.print(local_fields(millis, self.output_zone), len(distinct))
        return chunked(pc.take(printed, pc.index_in(strings, value_set=distinct)))

    def _parse(self, value: str) -> datetime:
        for pattern in self.inputs:
            moment = pattern.parse(value)
            if moment is not None:
                return moment
        formats = ", ".join(repr(p.text) for p in self.inputs)
        raise ValueError(f"date string {value!r} matches none of the input formats {formats}")

    def _default_string(self) -> str:
        """`getDefaultPartitionVal` for the string types: 1 ms after the epoch, printed."""
        assert self.default_input is not None
        one = pa.chunked_array([pa.array([1], pa.int64())])
        return str(self.default_input.print(local_fields(one, self.default_zone), 1)[0])


def timestamp_partitioning(config: TableConfig) -> TimestampPartitioning:
    """The table's timestamp key generator settings; `UnsupportedTableError` says why the
    partition path cannot be computed as Hudi does."""
    kind_name = _setting(config, "timestamp.type")
    if kind_name is None:
        raise UnsupportedTableError(f"{PREFIX}timestamp.type is not in hoodie.properties")
    try:
        kind = TimestampType(kind_name)
    except ValueError:
        raise UnsupportedTableError(f"{PREFIX}timestamp.type={kind_name!r} is unknown") from None
    parser = config.get(DATE_TIME_PARSER) or config.get(OLD_DATE_TIME_PARSER)
    if parser and parser != HOODIE_DATE_TIME_PARSER:
        raise UnsupportedTableError(f"date time parser {parser} is not handled")
    output = _setting(config, "output.dateformat")
    if output is None:
        raise UnsupportedTableError(f"{PREFIX}output.dateformat is not in hoodie.properties")
    input_zone, output_zone = _zones(config)
    if not kind.parses_strings:
        if output_zone is None:
            raise UnsupportedTableError(
                f"{PREFIX}output.timezone is not in hoodie.properties: Hudi printed the partition"
                " path in the writing JVM's default time zone, which the table does not record"
            )
        unit = _unit(config, kind)
        return TimestampPartitioning(kind, Pattern.compile(output), output_zone, unit)
    if input_zone is None and output_zone is not None:
        raise UnsupportedTableError(
            f"{PREFIX}input.timezone is not in hoodie.properties while the output zone is:"
            " Hudi parsed date strings in the writing JVM's default time zone"
        )
    raw, patterns = _input_formats(config)
    return TimestampPartitioning(
        kind,
        Pattern.compile(output),
        output_zone or input_zone or "UTC",
        inputs=tuple(Pattern.compile(p, parsing=True) for p in patterns),
        default_input=Pattern.compile(raw),
        input_zone=input_zone or "UTC",
        default_zone=input_zone or output_zone or "UTC",
    )


def _setting(config: TableConfig, name: str) -> str | None:
    """`ConfigUtils.getStringWithAltKeys`: the key, else its older alternative."""
    for key in (PREFIX + name, OLD_PREFIX + name):
        if key in config.props:
            return config.props[key]
    return None


def _zones(config: TableConfig) -> tuple[str | None, str | None]:
    """`HoodieDateTimeParser.getInputDateTimeZone` / `getOutputDateTimeZone`; None is the JVM's
    default zone."""
    both = _setting(config, "timezone")
    names = (
        ("timezone", both, "timezone", both)
        if both is not None
        else (
            "input.timezone",
            _setting(config, "input.timezone"),
            "output.timezone",
            _setting(config, "output.timezone"),
        )
    )
    input_key, input_name, output_key, output_name = names
    return _zone(input_key, input_name), _zone(output_key, output_name)


def _zone(key: str, name: str | None) -> str | None:
    if name is None or not name.strip():
        return None
    return time_zone(name, PREFIX + key)


def _unit(config: TableConfig, kind: TimestampType) -> str:
    if kind in _UNIT_OF_TYPE:
        return _UNIT_OF_TYPE[kind]
    unit = (_setting(config, "timestamp.scalar.time.unit") or "SECONDS").upper()
    if unit not in _MILLIS_PER_UNIT and unit not in _UNITS_PER_MILLI:
        raise UnsupportedTableError(f"{PREFIX}timestamp.scalar.time.unit={unit!r} is unknown")
    return unit


def _input_formats(config: TableConfig) -> tuple[str, list[str]]:
    """The input formats split as `HoodieDateTimeParser` splits them (`String.split` by the
    delimiter regex, each trimmed), and the first one untrimmed (`getDefaultPartitionVal`)."""
    text = _setting(config, "input.dateformat") or ""
    if not text:
        raise UnsupportedTableError(f"{PREFIX}input.dateformat is not in hoodie.properties")
    delimiter = (_setting(config, "input.dateformat.list.delimiter.regex") or "").strip() or ","
    try:
        parts = re.split(delimiter, text)
    except re.error:
        raise UnsupportedTableError(f"input date format delimiter {delimiter!r}") from None
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    if not parts or any(not p.strip() for p in parts):
        raise UnsupportedTableError(f"{PREFIX}input.dateformat={text!r} has an empty format")
    return parts[0], [p.strip() for p in parts]


def _truncated_division(values: pa.ChunkedArray, divisor: int) -> pa.ChunkedArray:
    """Integer division rounding toward zero, as Java's `/`."""
    quotient = pc.divide(pc.abs(values), divisor)
    return chunked(pc.if_else(pc.less(values, 0), pc.negate(quotient), quotient))
