"""Partition paths of the timestamp-based key generator, checked against Hudi's rules.

Expected strings follow `TimestampBasedAvroKeyGenerator.getPartitionPath(Object)` and
`getDefaultPartitionVal`, `HoodieDateTimeParser` (zones, input format list) and Joda's
`DateTimeFormat`; several cases are those of Hudi's `TestTimestampBasedKeyGenerator` with the
clock-hour letter `hh` (not translated) written `HH`, which prints the same for these hours.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import TableConfig
from tms.hudi.record_keys import KeyGeneration, key_generation, key_generation_refusals

PREFIX = "hoodie.keygen.timebased."


def generation(
    timestamp_type: str, output: str, *, hive: bool = False, **settings: str
) -> KeyGeneration:
    """A timestamp key generator partitioning by `ts`, with `hoodie.keygen.timebased.<name>`
    settings given as keyword arguments (`input_timezone` for `input.timezone`)."""
    props = {
        "hoodie.table.version": "9",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "ts",
        "hoodie.table.keygenerator.type": "TIMESTAMP",
        "hoodie.datasource.write.hive_style_partitioning": str(hive).lower(),
        PREFIX + "timestamp.type": timestamp_type,
        PREFIX + "output.dateformat": output,
    }
    props |= {PREFIX + name.replace("_", "."): value for name, value in settings.items()}
    return key_generation(TableConfig(props))


def paths(keys: KeyGeneration, values: pa.Array) -> list[str]:
    rows = pa.table({"id": list(range(len(values))), "ts": values})
    return keys.partition_paths(rows).to_pylist()


def longs(*values: int | None) -> pa.Array:
    return pa.array(values, pa.int64())


def test_epoch_millis_print_in_the_output_zone_and_null_is_one_milli() -> None:
    keys = generation("EPOCHMILLISECONDS", "yyyy-MM-dd HH", timezone="GMT+8:00")
    assert paths(keys, longs(1578283932000, None)) == ["2020-01-06 12", "1970-01-01 08"]
    utc = generation("EPOCHMILLISECONDS", "yyyy-MM-dd HH", timezone="GMT")
    assert paths(utc, longs(1578283932000)) == ["2020-01-06 04"]


def test_epoch_micros_truncate_toward_zero_as_time_unit_convert() -> None:
    keys = generation("EPOCHMICROSECONDS", "yyyy-MM-dd HH:mm:ss.SSS", output_timezone="UTC")
    assert paths(keys, longs(1578283932123456, -1, -1001, None)) == [
        "2020-01-06 04:12:12.123",
        "1970-01-01 00:00:00.000",  # -1 µs is 0 ms, not -1 ms
        "1969-12-31 23:59:59.999",
        "1970-01-01 00:00:00.000",  # the default 1 µs
    ]


def test_unix_seconds_and_scalar_units() -> None:
    unix = generation("UNIX_TIMESTAMP", "yyyyMMddHHmmss", output_timezone="Asia/Shanghai")
    assert paths(unix, longs(1_700_000_000, None)) == ["20231115061320", "19700101080001"]
    days = generation("SCALAR", "yyyy-MM-dd HH", timezone="GMT", timestamp_scalar_time_unit="days")
    assert paths(days, longs(20000, None, 18736)) == [
        "2024-10-04 00",
        "1970-01-02 00",
        "2021-04-19 00",
    ]
    nanos = generation(
        "SCALAR", "HH:mm:ss.SSS", output_timezone="UTC", timestamp_scalar_time_unit="NANOSECONDS"
    )
    assert paths(nanos, longs(1_999_999, 86_399_999_999_999)) == ["00:00:00.001", "23:59:59.999"]


def test_a_date_field_counts_its_epoch_day_in_the_timestamp_unit() -> None:
    """`LocalDate` → `convertLongTimeToMillis(toEpochDay())`: days read as the configured unit."""
    keys = generation("EPOCHMILLISECONDS", "yyyy-MM-dd HH:mm:ss.SSS", output_timezone="UTC")
    days = pa.array([19723, None], pa.int32()).cast(pa.date32())
    assert paths(keys, days) == ["1970-01-01 00:00:19.723", "1970-01-01 00:00:00.001"]
    in_days = generation(
        "SCALAR", "yyyy/MM/dd", output_timezone="UTC", timestamp_scalar_time_unit="DAYS"
    )
    assert paths(in_days, days) == ["2024/01/01", "1970/01/02"]


def test_date_strings_parse_in_the_input_zone_and_print_in_the_output_zone() -> None:
    keys = generation(
        "DATE_STRING", "yyyy-MM-dd HH", timezone="GMT+8:00", input_dateformat="yyyy-MM-dd HH:mm:ss"
    )
    assert paths(keys, pa.array(["2020-01-06 12:12:12"])) == ["2020-01-06 12"]
    shifted = generation(
        "DATE_STRING",
        "yyyy-MM-dd'T'HH",
        input_dateformat="yyyy-MM-dd HH:mm",
        input_timezone="Europe/Berlin",
        output_timezone="UTC",
    )
    # winter +01:00, summer +02:00; in the autumn overlap Joda takes the earlier instant
    assert paths(
        shifted, pa.array(["2024-01-15 12:30", "2024-07-15 12:30", "2024-10-27 02:30"])
    ) == [
        "2024-01-15T11",
        "2024-07-15T10",
        "2024-10-27T00",
    ]
    with pytest.raises(ValueError, match="skips"):
        paths(shifted, pa.array(["2024-03-31 02:30"]))  # in the spring gap: Joda fails the write


def test_date_strings_without_zones_keep_their_local_fields() -> None:
    """No zone: parsed in the JVM's zone and printed in the zone parsed (`withOffsetParsed`), the
    same one; a null is 1 ms after the epoch printed in GMT, parsed back."""
    keys = generation("DATE_STRING", "yyyy/MM/dd/HH", input_dateformat="yyyy-MM-dd HH:mm:ss.SSS")
    values = pa.array(["2024-03-31 02:30:00.000", None, "__HIVE_DEFAULT_PARTITION__"])
    assert paths(keys, values) == ["2024/03/31/02", "1970/01/01/00", "1970/01/01/00"]


def test_the_first_input_format_that_reads_the_whole_string_wins() -> None:
    """`DateTimeFormatterBuilder.MatchingParser`: the parser reaching furthest, the first of
    those; Joda reads one or two digits for `MM` and literals ignoring case."""
    keys = generation(
        "MIXED",
        "MM/dd/yyyy HH:mm",
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss|yyyy-MM-dd'T'HH:mm:ss.SSS|yyyyMMdd|yyyy-MM-dd",
        input_dateformat_list_delimiter_regex=" \\| ",
        timezone="UTC",
    )
    assert paths(
        keys,
        pa.array(["2020-04-01T13:01:33", "2020-04-01t13:01:33.5", "20200401", "2020-4-1"]),
    ) == ["04/01/2020 13:01", "04/01/2020 13:01", "04/01/2020 00:00", "04/01/2020 00:00"]
    with pytest.raises(ValueError, match="matches none of the input formats"):
        paths(keys, pa.array(["2020-04-01 13:01:33"]))
    with pytest.raises(ValueError, match="month"):
        paths(keys, pa.array(["2020-13-01"]))  # the first format reading it decides, and fails


def test_the_older_setting_names_are_read_too() -> None:
    props = {
        "hoodie.table.version": "6",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "ts",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.deltastreamer.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
        "hoodie.deltastreamer.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.deltastreamer.keygen.timebased.timezone": "UTC",
    }
    keys = key_generation(TableConfig(props))
    assert paths(keys, longs(1_700_000_000)) == ["2023/11/14"]


def test_hive_style_and_url_encoding_apply_to_the_printed_path() -> None:
    keys = generation("EPOCHMILLISECONDS", "yyyy/MM/dd", hive=True, output_timezone="UTC")
    assert paths(keys, longs(1_700_000_000_000)) == ["ts=2023/11/14"]
    encoded = key_generation(
        TableConfig(
            {
                **_props_of("EPOCHMILLISECONDS", "yyyy/MM/dd"),
                PREFIX + "output.timezone": "UTC",
                "hoodie.datasource.write.partitionpath.urlencode": "true",
                "hoodie.datasource.write.hive_style_partitioning": "true",
            }
        )
    )
    assert paths(encoded, longs(1_700_000_000_000)) == ["ts=2023%2F11%2F14"]


def test_two_letter_years_and_quoted_literals_print_as_joda_does() -> None:
    keys = generation(
        "EPOCHMILLISECONDS", "'year 'yy' ''q'''-M-d'日'H'h'm", output_timezone="GMT-0530"
    )
    assert paths(keys, longs(1_704_067_200_000)) == ["year 23 'q'-12-31日18h30"]


def test_record_keys_do_not_depend_on_the_timestamp_settings() -> None:
    """The record key is the single record key field (`SimpleAvroKeyGenerator`); the table
    stays serviceable when its timestamp settings are not reproduced."""
    keys = generation("EPOCHMILLISECONDS", "yyyy-MM-dd")  # no output zone: refused below
    rows = pa.table({"id": [3, 4], "ts": longs(1, 2)})
    assert keys.record_keys(rows).to_pylist() == ["3", "4"]
    assert key_generation_refusals(TableConfig(_props_of("EPOCHMILLISECONDS", "yyyy"))) == []
    with pytest.raises(UnsupportedTableError, match="default time zone"):
        keys.partition_paths(rows)


@pytest.mark.parametrize(
    ("timestamp_type", "output", "settings", "reason"),
    [
        (None, "yyyy", {}, "timestamp.type is not in hoodie.properties"),
        ("EPOCH", "yyyy", {}, "timestamp.type='EPOCH' is unknown"),
        ("EPOCHMILLISECONDS", None, {}, "output.dateformat is not in hoodie.properties"),
        ("EPOCHMILLISECONDS", "yyyy", {}, "output.timezone is not in hoodie.properties"),
        ("UNIX_TIMESTAMP", "yyyy-MM-dd hh", {"timezone": "UTC"}, "'yyyy-MM-dd hh' uses 'hh'"),
        ("UNIX_TIMESTAMP", "yyyyMMddZ", {"timezone": "UTC"}, "'yyyyMMddZ' uses 'Z'"),
        ("UNIX_TIMESTAMP", "EEE", {"timezone": "UTC"}, "uses 'EEE'"),
        ("UNIX_TIMESTAMP", "MMM", {"timezone": "UTC"}, "uses 'MMM'"),
        ("UNIX_TIMESTAMP", "", {"timezone": "UTC"}, "an empty date pattern"),
        ("UNIX_TIMESTAMP", "yyyy", {"timezone": "EST"}, "timezone='EST' is not translated"),
        ("UNIX_TIMESTAMP", "yyyy", {"timezone": "UTC+8"}, "timezone='UTC+8' is not translated"),
        ("UNIX_TIMESTAMP", "yyyy", {"timezone": "GMT+24"}, "is not translated"),
        ("SCALAR", "yyyy", {"timezone": "UTC", "timestamp.scalar.time.unit": "WEEKS"}, "WEEKS"),
        ("DATE_STRING", "yyyy", {}, "input.dateformat is not in hoodie.properties"),
        ("DATE_STRING", "yyyy", {"input.dateformat": "yy-MM"}, "two-digit year"),
        ("DATE_STRING", "yyyy", {"input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ"}, "uses 'Z'"),
        ("DATE_STRING", "yyyy", {"input.dateformat": "yyyy,,yyyyMM"}, "has an empty format"),
        ("DATE_STRING", "yyyy", {"input.dateformat": "yyyy-MM-yyyy"}, "parses a field twice"),
        (
            "DATE_STRING",
            "yyyy",
            {"input.dateformat": "yyyy", "output.timezone": "UTC"},
            "input.timezone is not in hoodie.properties while the output zone is",
        ),
    ],
)
def test_settings_we_cannot_reproduce_refuse_partition_paths_naming_them(
    timestamp_type: str | None, output: str | None, settings: dict[str, str], reason: str
) -> None:
    props = _props_of(timestamp_type, output) | {PREFIX + k: v for k, v in settings.items()}
    keys = key_generation(TableConfig(props))
    assert keys.partition_refusal is not None
    assert reason in keys.partition_refusal
    assert "TIMESTAMP" in keys.partition_refusal  # names the key generator
    with pytest.raises(UnsupportedTableError, match="TIMESTAMP"):
        keys.partition_paths(pa.table({"id": [1], "ts": longs(1)}))


def test_a_custom_date_time_parser_refuses_partition_paths() -> None:
    props = _props_of("UNIX_TIMESTAMP", "yyyy") | {
        PREFIX + "timezone": "UTC",
        "hoodie.keygen.datetime.parser.class": "com.example.Parser",
    }
    keys = key_generation(TableConfig(props))
    assert keys.partition_refusal is not None and "com.example.Parser" in keys.partition_refusal


@pytest.mark.parametrize(
    ("zone", "printed"),
    [
        ("GMT+8", "08"),
        ("GMT+0830", "08:30"),
        ("GMT+830", "08:30"),
        ("GMT-5:30", "18:30"),
        ("Asia/Kolkata", "05:30"),
        ("UTC", "00:00"),
    ],
)
def test_zone_names_java_understands_are_translated(zone: str, printed: str) -> None:
    keys = generation("EPOCHMILLISECONDS", "HH:mm" if ":" in printed else "HH", timezone=zone)
    assert paths(keys, longs(0)) == [printed]


@pytest.mark.parametrize(
    ("timestamp_type", "kind", "reason"),
    [
        ("EPOCHMILLISECONDS", pa.string(), "an integer or a date"),
        ("EPOCHMILLISECONDS", pa.timestamp("us"), "consistent.logical.timestamp.enabled"),
        ("EPOCHMILLISECONDS", pa.float64(), "an integer or a date"),
        ("DATE_STRING", pa.int64(), "a string"),
    ],
)
def test_field_types_the_timestamp_type_does_not_read_are_refused(
    timestamp_type: str, kind: pa.DataType, reason: str
) -> None:
    keys = generation(timestamp_type, "yyyy", timezone="UTC", input_dateformat="yyyy-MM-dd")
    with pytest.raises(UnsupportedTableError, match=reason):
        paths(keys, pa.nulls(1, kind))


def _props_of(timestamp_type: str | None, output: str | None) -> dict[str, str]:
    props = {
        "hoodie.table.version": "9",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "ts",
        "hoodie.table.keygenerator.type": "TIMESTAMP",
    }
    if timestamp_type is not None:
        props[PREFIX + "timestamp.type"] = timestamp_type
    if output is not None:
        props[PREFIX + "output.dateformat"] = output
    return props
