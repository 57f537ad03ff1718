"""JSON text byte for byte as Hudi's Java side writes it (Jackson's default pretty printer),
so commit metadata we write diffs cleanly against Hudi's own."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps_jackson(value: Any) -> str:
    """JSON text as Jackson's ``DefaultPrettyPrinter`` writes it.

    Objects put one ``"key" : value`` per line, indented two spaces per object level; arrays stay
    on the line (``[ a, b ]``) and do not add indentation; empty containers are ``{ }`` / ``[ ]``.
    """
    parts: list[str] = []
    _dump(value, 0, parts)
    return "".join(parts)


def _dump(value: Any, level: int, out: list[str]) -> None:
    if isinstance(value, Mapping):
        if not value:
            out.append("{ }")
            return
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            out.append("\n" if index == 0 else ",\n")
            out.append("  " * (level + 1))
            out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(" : ")
            _dump(item, level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[ ]")
            return
        out.append("[ ")
        for index, item in enumerate(value):
            if index:
                out.append(", ")
            _dump(item, level, out)
        out.append(" ]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))
