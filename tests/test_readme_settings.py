"""The README's settings table is the one `Settings` renders: every setting, its default and
its description, in the order the model declares them."""

from __future__ import annotations

from pathlib import Path

from tms.config.readme_table import BEGIN, END, replace_table, settings_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_settings_table_is_the_one_settings_render() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the README marks one settings table"
    assert replace_table(text) == text, (
        "README.md's settings table differs from the Settings fields; regenerate it with "
        "`python -m tms.config.readme_table README.md`"
    )


def test_the_table_has_a_row_per_setting_and_keeps_a_bar_in_its_cell() -> None:
    table = settings_table()
    assert "| `TMS_MARKER_BATCH_FILES` | 20 |" in table
    assert "| `TMS_MAX_REQUEST_BYTES` | 1048576 (1 MiB) |" in table
    assert "| `TMS_DATA_DIR` | `./.tms` |" in table
    rows = [line for line in table.splitlines() if line.startswith("| `TMS_")]
    assert all(line.replace("\\|", "").count("|") == 4 for line in rows)
