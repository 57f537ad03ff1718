"""Files tms rewrites or deletes on a local disk lose the checksum file Hadoop's
`LocalFileSystem` keeps beside what Hudi wrote (`.<name>.crc`): a stale one makes Hudi's reader
refuse the file (`ChecksumException`: "Could not load Hoodie properties" after tms rewrote
`hoodie.properties`)."""

from __future__ import annotations

from pathlib import Path

from tms.hudi.storage import Storage


def hadoop_wrote(folder: Path, name: str, data: bytes) -> Path:
    """A file with a checksum file beside it, as Hadoop's LocalFileSystem leaves them."""
    (folder / name).write_bytes(data)
    checksum = folder / f".{name}.crc"
    checksum.write_bytes(b"crc\x00\x00\x02\x00stale")
    return checksum


def test_a_rewritten_file_loses_its_stale_checksum(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    (tmp_path / ".hoodie").mkdir()
    checksum = hadoop_wrote(tmp_path / ".hoodie", "hoodie.properties", b"a=1\n")
    other = hadoop_wrote(tmp_path / ".hoodie", "other", b"x")
    storage.write_bytes(".hoodie/hoodie.properties", b"a=2\n")
    assert not checksum.exists()
    assert (tmp_path / ".hoodie" / "hoodie.properties").read_bytes() == b"a=2\n"
    assert other.exists()  # only the rewritten file's

    data_checksum = hadoop_wrote(tmp_path, "f.log", b"old")
    storage.write_bytes("f.log", b"new", atomic=False)
    assert not data_checksum.exists()


def test_a_deleted_file_leaves_no_checksum_behind(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    checksum = hadoop_wrote(tmp_path, "base.parquet", b"PAR1")
    assert storage.delete("base.parquet")
    assert not checksum.exists()
    assert not storage.delete("base.parquet")  # already gone: nothing to do, no error
