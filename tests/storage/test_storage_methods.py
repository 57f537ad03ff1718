"""Every `Storage` method does the same on local disk and on a real S3 endpoint, and records
the same requests (what the call costs on an object store) on both."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.storage.conftest import SECRET_KEY, S3Endpoint
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.data import read_footer
from tms.hudi.storage import Storage
from tms.hudi.storage.requests import RequestKind, counting


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return Storage(str(tmp_path / "t"))
    s3: S3Endpoint = request.getfixturevalue("s3")
    return Storage(s3.base_path("methods"), storage_options=s3.storage_options)


def counts_of(call: object) -> dict[str, int]:
    """The non-zero request counts of one call."""
    assert callable(call)
    with counting() as counts:
        call()
    return {kind: n for kind, n in counts.as_dict().items() if n}


def test_a_written_file_reads_back_whole(storage: Storage) -> None:
    storage.write_bytes(".hoodie/timeline/1.commit", b"{}")
    storage.write_bytes("p/data.parquet", b"x" * 10, atomic=False)
    assert storage.read_bytes(".hoodie/timeline/1.commit") == b"{}"
    assert storage.read_bytes("p/data.parquet") == b"x" * 10
    assert storage.info("p/data.parquet").size == 10
    assert storage.exists("p/data.parquet") and storage.exists("p")
    assert not storage.exists("p/other.parquet")
    storage.write_bytes(".hoodie/timeline/1.commit", b'{"a": 1}')
    assert storage.read_bytes(".hoodie/timeline/1.commit") == b'{"a": 1}'


def test_create_new_refuses_a_name_that_exists(storage: Storage) -> None:
    storage.create_new(".hoodie/.lock/owner", b"first")
    with pytest.raises(FileExistsError):
        storage.create_new(".hoodie/.lock/owner", b"second")
    assert storage.read_bytes(".hoodie/.lock/owner") == b"first"
    assert [f.name for f in storage.list_dir(".hoodie/.lock")] == ["owner"]


def test_touch_creates_then_refreshes_an_empty_file(storage: Storage) -> None:
    storage.touch(".hoodie/.heartbeat/001")
    first = storage.modified(".hoodie/.heartbeat/001")
    storage.touch(".hoodie/.heartbeat/001")
    assert storage.info(".hoodie/.heartbeat/001").size == 0
    assert storage.modified(".hoodie/.heartbeat/001") >= first


def test_listing_shows_files_and_folders_and_nothing_for_a_missing_folder(
    storage: Storage,
) -> None:
    storage.makedirs(".hoodie/.temp")
    assert storage.list_dir(".hoodie/.temp") == []
    assert storage.list_dir("missing") == []
    assert list(storage.walk_files("missing")) == []
    storage.write_bytes("a/1.parquet", b"1")
    storage.write_bytes("a/b/2.parquet", b"22")
    storage.write_bytes("a/b/c/3.parquet", b"333")
    listed = {(f.name, f.is_dir) for f in storage.list_dir("a")}
    assert listed == {("1.parquet", False), ("b", True)}
    walked = sorted((f.path, f.size) for f in storage.walk_files("a"))
    assert walked == [("a/1.parquet", 1), ("a/b/2.parquet", 2), ("a/b/c/3.parquet", 3)]


def test_deletes_leave_nothing_and_may_be_repeated(storage: Storage) -> None:
    storage.write_bytes("p/f.parquet", b"1")
    assert storage.delete("p/f.parquet")
    assert not storage.exists("p/f.parquet")
    storage.delete("p/f.parquet")  # a retried delete does not fail
    storage.write_bytes(".hoodie/.temp/001/p/f.parquet.marker.CREATE", b"")
    storage.write_bytes(".hoodie/.temp/001/g.parquet.marker.CREATE", b"")
    storage.delete_dir(".hoodie/.temp/001")
    assert list(storage.walk_files(".hoodie/.temp")) == []
    assert not storage.exists(".hoodie/.temp/001")
    storage.delete_dir(".hoodie/.temp/001")


def test_uris_name_the_scheme_for_readers_outside(storage: Storage) -> None:
    assert storage.uri("p/f.parquet") == f"{storage.base_path}/p/f.parquet"
    if not storage.base_path.startswith("/"):
        assert storage.base_path.startswith("s3://")


def test_each_method_costs_the_same_requests_on_disk_and_on_s3(storage: Storage) -> None:
    assert counts_of(lambda: storage.write_bytes("p/1.parquet", b"1")) == {"PUT": 1}
    assert counts_of(lambda: storage.create_new("p/2.parquet", b"2")) == {"PUT": 1}
    assert counts_of(lambda: storage.touch(".hoodie/.heartbeat/1")) == {"PUT": 1}
    assert counts_of(lambda: storage.makedirs("q")) == {}
    assert counts_of(lambda: storage.read_bytes("p/1.parquet")) == {"GET": 1}
    assert counts_of(lambda: storage.exists("p/1.parquet")) == {"HEAD": 1}
    assert counts_of(lambda: storage.exists("p")) == {"HEAD": 1, "LIST": 1}
    assert counts_of(lambda: storage.exists("nothing")) == {"HEAD": 1, "LIST": 1}
    assert counts_of(lambda: storage.modified("p/1.parquet")) == {"HEAD": 1}
    assert counts_of(lambda: storage.list_dir("p")) == {"LIST": 1}
    assert counts_of(lambda: list(storage.walk_files(""))) == {"LIST": 1}
    assert counts_of(lambda: storage.delete("p/1.parquet")) == {"DELETE": 1}
    assert counts_of(lambda: storage.delete_dir("p")) == {"LIST": 1, "DELETE": 1}
    assert counts_of(lambda: storage.delete_dir("p")) == {"LIST": 1}


def test_each_method_sends_s3_what_it_counts(s3: S3Endpoint) -> None:
    """The exported counts are what S3 bills: the server receives exactly the requests each
    method records, no HEAD before a GET and no extra probe after an empty listing."""
    storage = Storage(s3.base_path("wire"), storage_options=s3.storage_options)
    big = b"b" * (6 * 2**20)  # above s3fs's block size, which would split a concurrent read
    calls = [
        lambda: storage.write_bytes("p/1.parquet", b"1"),
        lambda: storage.write_bytes("p/big.parquet", big, atomic=False),
        lambda: storage.create_new("p/2.parquet", b"2"),
        lambda: storage.touch(".hoodie/.heartbeat/1"),
        lambda: storage.read_bytes("p/1.parquet"),
        lambda: storage.read_bytes("p/big.parquet"),
        lambda: storage.open_input("p/2.parquet"),
        lambda: storage.read_tail("p/big.parquet", 100),
        lambda: storage.read_tail("p/2.parquet", 100),
        lambda: storage.exists("p/1.parquet"),
        lambda: storage.exists("p"),
        lambda: storage.exists("nothing"),
        lambda: storage.list_dir("p"),
        lambda: storage.list_dir("nothing"),
        lambda: list(storage.walk_files("")),
        lambda: list(storage.walk_files(".hoodie/.aux/.bootstrap")),
        lambda: storage.delete("p/1.parquet"),
        lambda: storage.delete_dir("p"),
        lambda: storage.delete_dir("p"),
    ]
    for number, call in enumerate(calls):
        before, _ = s3.wire.snapshot()
        counted = counts_of(call)
        after, _ = s3.wire.snapshot()
        sent = {kind: after[kind] - before[kind] for kind in after if after[kind] > before[kind]}
        assert sent == counted, f"call {number}"


def test_s3a_paths_go_to_the_same_objects(s3: S3Endpoint) -> None:
    """Spark's Hadoop writers name tables `s3a://`: the same bucket and keys as `s3://`."""
    base = s3.base_path("alias")
    Storage(base, storage_options=s3.storage_options).write_bytes("f", b"via s3")
    alias = Storage(base.replace("s3://", "s3a://"), storage_options=s3.storage_options)
    assert alias.read_bytes("f") == b"via s3"
    assert alias.uri("f").startswith("s3a://")


def test_storage_options_stay_out_of_repr_and_errors(s3: S3Endpoint) -> None:
    storage = Storage(s3.base_path("secret"), storage_options=s3.storage_options)
    assert SECRET_KEY not in repr(storage)
    with pytest.raises(FileNotFoundError) as raised:
        storage.read_bytes("missing")
    assert SECRET_KEY not in str(raised.value) and SECRET_KEY not in repr(raised.value)


@pytest.mark.parametrize(
    ("base_path", "says"),
    [
        ("nosuch://bucket/t", "storage scheme nosuch:// is not known"),
        ("hdfs://namenode:8020/t", "hdfs:// needs a Hadoop client"),
        ("gs://bucket/t", r"needs the gcs extra: pip install 'tms\[gcs\]'"),
        ("abfs://container/t", r"needs the azure extra: pip install 'tms\[azure\]'"),
    ],
)
def test_schemes_this_machine_cannot_reach_are_refused_clearly(base_path: str, says: str) -> None:
    extra_library = {"gs": "gcsfs", "abfs": "adlfs"}.get(base_path.split(":")[0])
    if extra_library and importlib.util.find_spec(extra_library):
        pytest.skip(f"{extra_library} is installed here")
    with pytest.raises(UnsupportedTableError, match=says) as raised:
        Storage(base_path)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_nothing_exists_below_a_file(storage: Storage) -> None:
    storage.write_bytes("file.txt", b"not a table")
    assert not storage.exists("file.txt/.hoodie/hoodie.properties")


def test_a_parquet_file_reads_back_through_a_counted_input(storage: Storage) -> None:
    rows = pa.table({"id": ["a", "b"], "n": [1, 2]})
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    storage.write_bytes("p/f.parquet", buffer.getvalue(), atomic=False)
    with counting() as counts, storage.open_input("p/f.parquet") as handle:
        assert pq.read_table(handle).equals(rows)
    assert counts.total == counts[RequestKind.GET] == 1


@pytest.mark.parametrize("row_groups", [1, 2000])
def test_a_base_files_footer_reads_from_its_end(storage: Storage, row_groups: int) -> None:
    """Footers fitting the first read cost one GET; a longer one (thousands of row groups)
    a second, and both equal the footer pyarrow reads from the whole file."""
    rows = pa.table({"id": [str(i) for i in range(row_groups * 2)], "n": range(row_groups * 2)})
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, row_group_size=2)
    storage.write_bytes("p/f.parquet", buffer.getvalue(), atomic=False)
    with counting() as counts:
        footer = read_footer(storage, "p/f.parquet")
    whole = pq.read_metadata(io.BytesIO(buffer.getvalue()))
    assert footer.num_rows == whole.num_rows and footer.num_row_groups == row_groups
    last = row_groups - 1
    assert footer.row_group(last).column(1).statistics == whole.row_group(last).column(1).statistics
    assert counts.total == counts[RequestKind.GET] == (1 if row_groups == 1 else 2)


def test_a_file_that_is_not_parquet_has_no_footer(storage: Storage) -> None:
    storage.write_bytes("p/f.parquet", b"not parquet", atomic=False)
    with pytest.raises(ValueError, match="not a Parquet file"):
        read_footer(storage, "p/f.parquet")
