"""What `tms demo` shows before its Spark work: its help, its refusals of bad options (which
must cost nothing: no table or folder deleted) and where its S3 server's access log goes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tms.cli import app
from tms.demo import DemoWriter
from tms.demo.logs import demo_logging
from tms.demo.s3 import local_s3
from tms.hudi.storage import Storage
from tms.testing.sample_writer.new_table import create_table


def _contents(*roots: Path) -> dict[str, str]:
    """Every file under `roots` with a hash of its bytes: what a refusal must leave alone."""
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def earlier_demo(tmp_path: Path) -> tuple[Path, Path]:
    """The table and service folder an earlier `tms demo` left."""
    base = tmp_path / "demo" / "trips"
    DemoWriter(str(base), rows=200, total_commits=3, table_version=9).commit()
    data_dir = tmp_path / "demo-service"
    (data_dir / "logs" / "1").mkdir(parents=True)
    (data_dir / "logs" / "1" / "1.log").write_text("compaction of demo.trips\n")
    return base, data_dir


def _demo(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["demo", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("option", "reason"),
    [
        (["--table-version", "7"], "--table-version 7: the demo creates its table as version 6"),
        (["--table-version", "5"], "--table-version 5: the demo creates its table as version 6"),
        (["--rows", "10"], "--rows 10: at least 100 trips"),
        (["--rounds", "0"], "--rounds 0: at least 1"),
    ],
)
def test_a_bad_option_exits_2_with_one_line_before_touching_the_table(
    earlier_demo: tuple[Path, Path], option: list[str], reason: str
) -> None:
    base, data_dir = earlier_demo
    before = _contents(base, data_dir)
    code, out, err = _demo(*option, "--base-path", str(base), "--data-dir", str(data_dir))
    assert code == 2, out + err
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {reason}"), err
    assert _contents(base, data_dir) == before


def test_another_table_at_the_base_path_is_never_deleted(tmp_path: Path) -> None:
    base = tmp_path / "lake" / "orders"
    create_table(str(base), "orders", record_key_fields=["id"], ordering_field="ts")
    before = _contents(base)
    code, _, err = _demo("--base-path", str(base), "--data-dir", str(tmp_path / "service"))
    assert code == 2
    assert err == (
        f"error: --base-path {base} holds the Hudi table orders: the demo deletes and rewrites "
        "its table there, so choose another path\n"
    )
    assert _contents(base) == before
    assert not (tmp_path / "service").exists()


def test_a_data_dir_with_someone_elses_files_is_never_cleared(tmp_path: Path) -> None:
    data_dir = tmp_path / "home"
    (data_dir / "notes.txt").parent.mkdir()
    (data_dir / "notes.txt").write_text("mine\n")
    code, _, err = _demo("--base-path", str(tmp_path / "trips"), "--data-dir", str(data_dir))
    assert code == 2
    assert err.startswith(f"error: --data-dir {data_dir} holds files the demo did not write")
    assert (data_dir / "notes.txt").read_text() == "mine\n"


def test_help_at_80_columns_names_the_extra_and_wraps_whole_lines() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = result.stdout
    assert "pip install 'tms[s3-demo]'" in " ".join(text.split())
    assert "--table-version <6|8|9>" in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    # The description's paragraphs fill their lines: only a paragraph's last line is short.
    description = "\n".join(lines[1 : lines.index("Options:")]).strip()
    for paragraph in description.split("\n\n"):
        filled = paragraph.splitlines()[:-1]
        assert all(len(line) >= 60 for line in filled), paragraph


def test_the_s3_servers_access_log_goes_to_the_demo_log_not_its_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "demo.log"
    with demo_logging(log), local_s3() as s3:
        storage = Storage(s3.base_path("trips"), storage_options=s3.storage_options)
        storage.write_bytes("hello.txt", b"hello")
        assert storage.read_bytes("hello.txt") == b"hello"
    out, err = capfd.readouterr()
    assert "HTTP/1.1" not in out + err, out + err
    written = log.read_text()
    assert '"PUT /tms-demo/trips/hello.txt HTTP/1.1" 200' in written
    assert "\x1b[" not in written  # no terminal colours in the file
