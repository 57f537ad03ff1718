"""The README's settings table, rendered from the `Settings` fields (variable, default,
description), so the README names every setting as the service reads it.

`python -m tms.config.readme_table [README.md]` rewrites the table between the README's
`<!-- settings table -->` and `<!-- /settings table -->` markers; a test compares the two.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tms.config.loading import SettingDoc, describe_settings
from tms.config.settings import Settings

__all__ = ["BEGIN", "END", "replace_table", "settings_table"]

BEGIN = "<!-- settings table -->"
END = "<!-- /settings table -->"
_HEADER = "| variable | default | meaning |\n|---|---|---|\n"
_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))


def settings_table() -> str:
    """One row per setting, in the order `Settings` declares them."""
    rows = [
        f"| `{doc.env}` | {_default(doc)} | {_escaped(doc.description)} |\n"
        for doc in describe_settings()
    ]
    return _HEADER + "".join(rows)


def replace_table(text: str) -> str:
    """`text` with the table between the markers replaced by `settings_table()`."""
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return text[:start] + "\n" + settings_table() + text[end:]


def _default(doc: SettingDoc) -> str:
    value = Settings.model_fields[doc.name].get_default(call_default_factory=True)
    if doc.default == "unset":
        return "unset" if value is None else "empty"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int) and not isinstance(value, bool) and doc.name.endswith("_bytes"):
        return doc.default + _size(value)
    if isinstance(value, int | float | bool):
        return doc.default
    return f"`{doc.default}`"


def _escaped(text: str) -> str:
    """A table cell's text: a `|` of its own does not end the cell."""
    return text.replace("|", "\\|")


def _size(value: int) -> str:
    for factor, unit in _UNITS:
        if value >= factor and value % factor == 0:
            return f" ({value // factor} {unit})"
    return ""


def main(argv: list[str]) -> None:
    readme = Path(argv[0] if argv else "README.md")
    readme.write_text(replace_table(readme.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
