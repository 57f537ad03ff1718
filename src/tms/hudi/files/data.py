"""Reading and writing the data files of a table: Parquet base files, log files, and the
partition metadata file, each written in one go so a reader never sees half a file."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tms.hudi.avro.schema import arrow_schema_from_avro, avro_records_to_table
from tms.hudi.files.avro_columns import ArrowRecords
from tms.hudi.files.bloom import DynamicBloomFilter
from tms.hudi.files.log_block import DeleteRecord, LogBlock
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.log_writer import encode_avro_data_block, encode_delete_block
from tms.hudi.files.names import PARTITION_METADATA
from tms.hudi.meta_fields import FILE_NAME, RECORD_KEY
from tms.hudi.record_keys import without_meta_values
from tms.hudi.storage import Storage

AVRO_SCHEMA_KEY = b"parquet.avro.schema"


def read_base_file(storage: Storage, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    with storage.open_input(path) as handle:
        return pq.read_table(handle, columns=list(columns) if columns else None)


FOOTER_GUESS = 64 * 1024
"""Bytes read from a base file's end for its footer: one GET holds most footers whole."""


def read_footer(storage: Storage, path: str) -> Any:
    """A base file's Parquet footer (`pyarrow.parquet.FileMetaData`), from the end of the
    file alone: one GET when the footer fits in `FOOTER_GUESS` bytes, else two."""
    tail = storage.read_tail(path, FOOTER_GUESS)
    if len(tail) < 8 or tail[-4:] != b"PAR1":
        raise ValueError(f"{path}: not a Parquet file")
    needed = int.from_bytes(tail[-8:-4], "little") + 8
    if needed > len(tail):
        tail = storage.read_tail(path, needed)
        if len(tail) < needed:
            raise ValueError(f"{path}: Parquet footer longer than the file")
    return pq.read_metadata(io.BytesIO(tail[-needed:]))


def write_base_file(
    storage: Storage,
    path: str,
    rows: pa.Table,
    avro_schema: dict[str, Any] | None = None,
    *,
    record_keys: pa.ChunkedArray | None = None,
) -> int:
    """Write a Parquet base file; returns its size in bytes.

    The footer carries what Hudi's readers look for: the record key range, and the Avro
    schema when one is given. `record_keys` gives the keys of rows that do not store them
    (a table without meta fields), for the key range. Rows that store their keys get Hudi's
    bloom filter of them too, as Hudi's writers give a table with meta fields.
    """
    metadata = dict(rows.schema.metadata or {})
    stores_keys = record_keys is None and RECORD_KEY in rows.column_names
    if stores_keys:
        record_keys = rows.column(RECORD_KEY)
    if rows.num_rows and record_keys is not None and record_keys.null_count < len(record_keys):
        metadata[b"hoodie_min_record_key"] = str(pc.min(record_keys).as_py()).encode()
        metadata[b"hoodie_max_record_key"] = str(pc.max(record_keys).as_py()).encode()
    if stores_keys and record_keys is not None:
        bloom = DynamicBloomFilter()
        bloom.add(record_keys)
        metadata.update(bloom.footer())
    if avro_schema is not None:
        metadata[AVRO_SCHEMA_KEY] = json.dumps(avro_schema).encode()
    rows = rows.replace_schema_metadata(metadata)
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, compression="snappy")
    data = buffer.getvalue()
    storage.write_bytes(path, data, atomic=False)
    return len(data)


def stored_rows(rows: pa.Table, file_name: str, meta_values: bool = True) -> pa.Table:
    """Merged rows as a new base file stores them: the file's own name in
    `_hoodie_file_name`, or no meta values at all in a table without meta fields."""
    if not meta_values:
        return without_meta_values(rows)
    position = rows.schema.get_field_index(FILE_NAME)
    return rows.set_column(
        position,
        pa.field(FILE_NAME, pa.string()),
        pa.repeat(pa.scalar(file_name, pa.string()), rows.num_rows),
    )


ZLIB_DEFAULT_LEVEL = 6
"""The gzip level of Hudi's Parquet writer (zlib's default); Arrow's own is slower and
hardly smaller."""

ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Bytes of rows (in Arrow) a base file's row group holds at most when written part by
part: small parts are held until they make a row group this large, so a file written from
many small parts is not cut into thousands of tiny row groups."""


def task_row_group_bytes(memory_budget: int) -> int:
    """A task's row groups: `ROW_GROUP_BYTES`, or an eighth of its memory budget when that
    is less: a `BaseFileWriter` holds two (one written while the parts of the next are
    held), a quarter of the budget beside the sort or merge that feeds them."""
    return min(ROW_GROUP_BYTES, memory_budget // 8)


class BaseFileWriter:
    """A Parquet base file written part by part into a local file, then moved into place
    (`Storage.move_in`): a file of any size is written holding at most two row groups
    (`row_group_bytes` each) of parts at a time.

    Each row group is encoded and written on a thread of its own while the caller makes the
    next one's parts (Arrow's Parquet writer runs without the interpreter lock): a task's
    merge or sort and its Parquet encoding use two cores. The keys of each part are added
    to the bloom filter on a thread of their own as well.

    The footer carries what `write_base_file` writes: the record key range (known at the
    end, so written last) and the Avro schema when one is given; with `bloom_filter`, Hudi's
    bloom filter of the record keys too (`tms.hudi.files.bloom`: a table with meta fields,
    whose writers' bloom index reads it). `compression` is the Parquet codec, as Arrow names
    it (`tms.hudi.files.codec` picks the table's).
    """

    def __init__(
        self,
        storage: Storage,
        path: str,
        local: str,
        schema: pa.Schema,
        avro_schema: dict[str, Any] | None = None,
        row_group_bytes: int = ROW_GROUP_BYTES,
        *,
        bloom_filter: bool = False,
        compression: str = "gzip",
    ) -> None:
        self._storage = storage
        self._path = path
        self._local = local
        metadata = dict(schema.metadata or {})
        if avro_schema is not None:
            metadata[AVRO_SCHEMA_KEY] = json.dumps(avro_schema).encode()
        self.schema = schema.with_metadata(metadata)
        level = ZLIB_DEFAULT_LEVEL if compression == "gzip" else None
        self._writer = pq.ParquetWriter(
            local, self.schema, compression=compression, compression_level=level
        )
        self._min: str | None = None
        self._max: str | None = None
        self._bloom = DynamicBloomFilter() if bloom_filter else None
        self._hashing = ThreadPoolExecutor(1, thread_name_prefix="bloom-filter")
        self._hashed: Future[None] | None = None
        """The part whose keys are being added to the bloom filter, if any."""
        self._row_group_bytes = row_group_bytes
        self._held: list[pa.Table] = []
        self._held_bytes = 0
        self._encoding = ThreadPoolExecutor(1, thread_name_prefix="parquet-row-group")
        self._written: Future[None] | None = None
        """The row group being written, if any."""
        self.rows = 0

    def write(self, rows: pa.Table, record_keys: pa.ChunkedArray | pa.Array | None = None) -> None:
        """Append rows (of the writer's schema); `record_keys` as in `write_base_file`."""
        if record_keys is None and RECORD_KEY in rows.column_names:
            record_keys = rows.column(RECORD_KEY)
        if rows.num_rows and record_keys is not None and record_keys.null_count < len(record_keys):
            low, high = (str(v) for v in pc.min_max(record_keys).values())
            self._min = low if self._min is None else min(self._min, low)
            self._max = high if self._max is None else max(self._max, high)
        if self._bloom is not None and record_keys is not None:
            self._wait_hashed()  # one part's keys at a time, hashed beside the merge
            self._hashed = self._hashing.submit(self._bloom.add, record_keys)
        self._held.append(rows.cast(self.schema))
        self._held_bytes += rows.nbytes
        self.rows += rows.num_rows
        if self._held_bytes >= self._row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        """The parts held so far, written as one row group once the previous one is."""
        self._wait()
        if self._held:
            held = pa.concat_tables(self._held)  # no copy: the parts become its chunks
            rows = max(1, held.num_rows * self._row_group_bytes // max(1, held.nbytes))
            self._written = self._encoding.submit(self._writer.write_table, held, rows)
        self._held, self._held_bytes = [], 0

    def _wait_hashed(self) -> None:
        """The keys being added to the bloom filter, added (their error raised here)."""
        hashed, self._hashed = self._hashed, None
        if hashed is not None:
            hashed.result()

    def _wait(self) -> None:
        """The row group being written, finished (its error raised here)."""
        written, self._written = self._written, None
        if written is not None:
            written.result()

    def close(self) -> int:
        """Finish the file and move it into place; returns its size in bytes."""
        try:
            self._flush()
            self._wait()
            self._wait_hashed()
        finally:
            self._encoding.shutdown()
            self._hashing.shutdown()
        footer: dict[bytes, bytes] = {}
        if self._min is not None and self._max is not None:
            footer[b"hoodie_min_record_key"] = self._min.encode()
            footer[b"hoodie_max_record_key"] = self._max.encode()
        if self._bloom is not None:
            footer.update(self._bloom.footer())
        if footer:
            self._writer.add_key_value_metadata(footer)
        self._writer.close()
        size = os.path.getsize(self._local)
        self._storage.move_in(self._local, self._path)
        return size


def write_log_file(
    storage: Storage,
    path: str,
    instant_time: str,
    avro_schema: dict[str, Any],
    *,
    records: pa.Table | None = None,
    deletes: Sequence[DeleteRecord] = (),
    ordering_field: str | None = None,
) -> int:
    """Write a new log file holding a data block and/or a delete block; returns its size."""
    data = b""
    if records is not None and records.num_rows:
        data += encode_avro_data_block(instant_time, avro_schema, records)
    if deletes:
        data += encode_delete_block(
            instant_time, avro_schema, list(deletes), ordering_field=ordering_field
        )
    storage.write_bytes(path, data, atomic=False)
    return len(data)


def read_log_file(storage: Storage, path: str) -> list[LogBlock]:
    return read_log_blocks(storage.read_bytes(path))


def block_records(block: LogBlock, schema: pa.Schema | None = None) -> pa.Table:
    """The records of a data block as a table (of the block's own schema by default)."""
    block_schema = block.schema
    if schema is None:
        if block_schema is None:
            raise ValueError(f"data block of {block.instant_time} has no schema")
        schema = arrow_schema_from_avro(block_schema)
    if isinstance(block.records, ArrowRecords):  # decoded into columns already
        return block.records.as_table(schema)
    return avro_records_to_table(block.records, schema)


def write_partition_metadata(storage: Storage, partition: str, instant_time: str) -> None:
    """`.hoodie_partition_metadata`: marks a folder as a partition, as Hudi does on first write."""
    path = f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA
    if storage.exists(path):
        return
    depth = len([p for p in partition.split("/") if p]) if partition else 0
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = f"#partition metadata\n#{stamp}\ncommitTime={instant_time}\npartitionDepth={depth}\n"
    storage.write_bytes(path, text.encode("utf-8"))
