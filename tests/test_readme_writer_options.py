"""The README's "Using tms with Hudi writers" gives exactly the writer options the hudi_java
tests run Apache Hudi with (tests/hudi_java/writer_options.py), snippet by snippet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hudi_java.writer_options import SNIPPETS, filled

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPET = re.compile(r"<!-- writer options: ([a-z-]+) -->\n```properties\n(.*?)```", re.S)


def readme_snippets() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for name, body in SNIPPET.findall(README.read_text(encoding="utf-8")):
        options = {}
        for line in body.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                key, _, value = line.partition("=")
                options[key.strip()] = value.strip()
        assert name not in found, f"the README gives the snippet {name} twice"
        found[name] = options
    return found


def test_the_readme_gives_every_snippet_the_tests_use() -> None:
    assert readme_snippets() == SNIPPETS


def test_filled_puts_a_tests_values_in_and_refuses_a_placeholder_left() -> None:
    options = filled(SNIPPETS["remote-view-and-markers"], tms_host="127.0.0.1", tms_port=9)
    assert options["hoodie.filesystem.view.remote.port"] == "9"
    with pytest.raises(ValueError, match="placeholder"):
        filled(SNIPPETS["commit-callback"], tms_host="h", tms_port=1)
