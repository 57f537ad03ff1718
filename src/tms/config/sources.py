"""Where settings come from: `TMS_*` variables (or a given mapping) and the TOML file.

The file is `TMS_CONFIG` when set, else `conf/tms.toml` when it exists. `load_settings` picks
the sources for one build of `Settings`; `Settings.settings_customise_sources` reads them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
)

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "ENV_PREFIX",
    "SettingsError",
    "Sources",
    "config_file_from",
    "current_sources",
    "reading",
]

ENV_PREFIX = "TMS_"
DEFAULT_CONFIG_FILE = Path("conf/tms.toml")


class SettingsError(ValueError):
    """Settings that cannot be used; the message lists each bad setting by its env variable."""


@dataclass(frozen=True)
class Sources:
    config_file: Path | None
    environ: Mapping[str, str] | None

    @staticmethod
    def default() -> Sources:
        return Sources(config_file_from(os.environ), None)


_SOURCES: ContextVar[Sources | None] = ContextVar("tms_settings_sources", default=None)


def config_file_from(environ: Mapping[str, str]) -> Path | None:
    named = environ.get(f"{ENV_PREFIX}CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise SettingsError(f"{ENV_PREFIX}CONFIG: {path} does not exist")
        return path
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


class _MappingEnvSource(EnvSettingsSource):
    """The environment source, reading a given mapping instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items()}


@contextlib.contextmanager
def reading(options: Sources) -> Iterator[None]:
    token = _SOURCES.set(options)
    try:
        yield
    finally:
        _SOURCES.reset(token)


def current_sources(
    settings_cls: type[BaseSettings],
    init_settings: PydanticBaseSettingsSource,
    env_settings: PydanticBaseSettingsSource,
) -> tuple[PydanticBaseSettingsSource, ...]:
    """The sources of the build under way, highest precedence first: keyword arguments, the
    environment (or the given mapping), the TOML file when there is one."""
    options = _SOURCES.get() or Sources.default()
    env = (
        env_settings
        if options.environ is None
        else _MappingEnvSource(settings_cls, options.environ)
    )
    if options.config_file is None:
        return init_settings, env
    return init_settings, env, TomlConfigSettingsSource(settings_cls, options.config_file)
