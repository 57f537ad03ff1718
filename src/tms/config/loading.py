"""Building settings: from the process's sources once (`get_settings`) or explicitly
(`load_settings`), with every problem explained by its environment variable; and the table
of all settings (`describe_settings`) the README and `conf/tms.toml` follow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from tms.config.settings import Settings
from tms.config.sources import ENV_PREFIX, SettingsError, Sources, config_file_from, reading

__all__ = ["SettingDoc", "describe_settings", "get_settings", "load_settings"]


def load_settings(
    *,
    config_file: Path | Literal[False] | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build settings explicitly (tests, CLI): `config_file=False` reads no file, `None` the
    usual one; `environ` replaces `os.environ`; keyword overrides win over both."""
    env = os.environ if environ is None else environ
    file = None if config_file is False else config_file or config_file_from(env)
    try:
        with reading(Sources(file, environ)):
            return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_explain(exc, file)) from None


def _explain(exc: ValidationError, file: Path | None) -> str:
    lines = [f"invalid settings (environment {ENV_PREFIX}*, config file {file or 'none'}):"]
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        msg = error["msg"].removeprefix("Value error, ")
        if not loc:
            lines.append(f"  {msg}")
            continue
        name = loc[0]
        where = f"{ENV_PREFIX}{name.upper()} ({'.'.join(loc)})"
        if error["type"] == "extra_forbidden":
            lines.append(f"  {name}: unknown setting (a typo in the config file?)")
        elif name in {"auth_tokens", "callback_keys", "database_url"}:
            lines.append(f"  {where}: {msg}")
        else:
            lines.append(f"  {where}: {msg}; got {error.get('input')!r}")
    return "\n".join(lines)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, loaded once; `get_settings.cache_clear()` reloads."""
    return load_settings()


class SettingDoc(NamedTuple):
    name: str
    env: str
    default: str
    description: str


def describe_settings() -> list[SettingDoc]:
    """One row per setting, for the README table and the check that conf/tms.toml lists all."""
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if isinstance(default, list | tuple | dict):
            default = (
                ",".join(f"{k}:{v}" for k, v in default.items())
                if isinstance(default, dict)
                else ",".join(str(v) for v in default)
            )
        if isinstance(default, bool):
            default = str(default).lower()
        elif isinstance(default, Path):
            default = f"./{default}"
        shown = "unset" if default in (None, "") else str(default)
        rows.append(SettingDoc(name, f"{ENV_PREFIX}{name.upper()}", shown, field.description or ""))
    return rows
