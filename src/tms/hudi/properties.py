"""`hoodie.properties`: the table's configuration, a Java properties file with a checksum."""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from tms.hudi.storage import Storage

PROPERTIES_PATH = ".hoodie/hoodie.properties"

TABLE_NAME = "hoodie.table.name"
DATABASE_NAME = "hoodie.database.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
TIMELINE_PATH = "hoodie.timeline.path"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
KEY_GENERATOR_CLASS = "hoodie.table.keygenerator.class"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
CHECKSUM = "hoodie.table.checksum"
ARCHIVELOG_FOLDER = "hoodie.archivelog.folder"
BOOTSTRAP_BASE_PATH = "hoodie.bootstrap.base.path"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
CREATE_SCHEMA = "hoodie.table.create.schema"
INITIAL_VERSION = "hoodie.table.initial.version"
TIMELINE_HISTORY_PATH = "hoodie.timeline.history.path"
KEY_GENERATOR_TYPE = "hoodie.table.keygenerator.type"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
RECORD_MERGE_STRATEGY_ID = "hoodie.record.merge.strategy.id"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
TABLE_FORMAT = "hoodie.table.format"
TIMELINE_TIMEZONE = "hoodie.timeline.timezone"

EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
"""Record merge mode: the highest ordering value wins (table version 8+)."""
COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
"""Record merge mode: the latest write wins (table version 8+)."""

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"


def _unescape(value: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        index += 1
        if char != "\\":
            out.append(char)
            continue
        nxt = value[index : index + 1]
        index += 1
        if nxt == "u" and _is_hex4(value[index : index + 4]):
            out.append(chr(int(value[index : index + 4], 16)))
            index += 4
            continue
        out.append({"n": "\n", "t": "\t", "r": "\r", "f": "\f"}.get(nxt, nxt))
    # `\uXXXX` escapes of a surrogate pair (characters beyond the BMP) make one character.
    text = "".join(out)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _is_hex4(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _escape(value: str, is_key: bool) -> str:
    """As `java.util.Properties.store(OutputStream)` writes a key or value: the file is ASCII,
    anything outside printable ASCII becomes `\\uXXXX` (Hudi reads it back as ISO-8859-1)."""
    out: list[str] = []
    for index, char in enumerate(value):
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif char == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif " " < char <= "~":
            out.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            out += [f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2)]
    return "".join(out)


_WHITESPACE = " \t\f"
"""Whitespace of Java properties files (not Python's wider notion)."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (comments, `=`/`:` separators, escapes, continuations)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(_WHITESPACE)
        if not logical and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_pair(logical)
        props[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, value = _split_pair(logical)
        props[_unescape(key)] = _unescape(value)
    return props


def _split_pair(line: str) -> tuple[str, str]:
    escaped = False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=:" or char in _WHITESPACE:
            rest = line[index:].lstrip(_WHITESPACE)
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:index], rest.lstrip(_WHITESPACE)
    return line, ""


def table_checksum(table_name: str, database_name: str = "") -> int:
    """Hudi's checksum of `hoodie.properties`: CRC32 of `<database>.<table>` in UTF-8
    (`HoodieTableConfig.generateChecksum`; the database is `hoodie.database.name`, often empty).
    Hudi refuses to load a `hoodie.properties` whose checksum does not match."""
    return zlib.crc32(f"{database_name}.{table_name}".encode()) & 0xFFFFFFFF


def format_properties(props: Mapping[str, str]) -> str:
    """Serialize like `java.util.Properties.store`, keys sorted so diffs stay readable."""
    lines = ["#Updated at " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class TableConfig:
    """The typed view of `hoodie.properties` that the rest of `tms.hudi` needs."""

    props: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, storage: Storage) -> TableConfig:
        data = storage.read_bytes(PROPERTIES_PATH)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # Java writes ISO-8859-1 (non-ASCII is \\u-escaped anyway)
            text = data.decode("iso-8859-1")
        return cls(parse_properties(text))

    def save(self, storage: Storage) -> None:
        props = dict(self.props)
        props[CHECKSUM] = str(table_checksum(self.table_name, self.get(DATABASE_NAME)))
        storage.write_bytes(PROPERTIES_PATH, format_properties(props).encode("utf-8"))

    def get(self, key: str, default: str = "") -> str:
        return self.props.get(key, default)

    @property
    def table_name(self) -> str:
        return self.get(TABLE_NAME)

    @property
    def table_type(self) -> str:
        return self.get(TABLE_TYPE, COPY_ON_WRITE).upper()

    @property
    def is_merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def table_version(self) -> int:
        return int(self.get(TABLE_VERSION, "0") or 0)

    @property
    def timeline_layout_version(self) -> int:
        value = self.get(TIMELINE_LAYOUT_VERSION)
        if value:
            return int(value)
        return 2 if self.table_version >= 8 else 1

    @property
    def timeline_path(self) -> str:
        """Where instants live, relative to the base path."""
        if self.timeline_layout_version >= 2:
            return ".hoodie/" + (self.get(TIMELINE_PATH) or "timeline")
        return ".hoodie"

    @property
    def record_key_fields(self) -> list[str]:
        return _split_list(self.get(RECORD_KEY_FIELDS))

    @property
    def ordering_fields(self) -> list[str]:
        """`hoodie.table.ordering.fields` (version 9), else the older precombine key."""
        return _split_list(self.get(ORDERING_FIELDS) or self.get(PRECOMBINE_FIELD))

    @property
    def partition_fields(self) -> list[str]:
        """Partition fields; a key generator may append `:type` to a field, which is dropped."""
        return [f.split(":")[0] for f in _split_list(self.get(PARTITION_FIELDS))]

    @property
    def hive_style_partitioning(self) -> bool:
        return self.get(HIVE_STYLE_PARTITIONING, "false").lower() == "true"

    @property
    def base_file_format(self) -> str:
        return self.get(BASE_FILE_FORMAT, "PARQUET").upper()

    @property
    def metadata_partitions(self) -> list[str]:
        return _split_list(self.get(METADATA_PARTITIONS))

    @property
    def populate_meta_fields(self) -> bool:
        return self.get(POPULATE_META_FIELDS, "true").lower() == "true"


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
