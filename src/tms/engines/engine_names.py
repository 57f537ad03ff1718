"""Engines by name: an operation's `engine` column picks one (`spark` unless submitted
otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tms.engines.base import Engine, LaunchError
from tms.engines.spark_submit import SparkSubmitEngine

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = ["DEFAULT_ENGINE", "EngineRegistry", "UnknownEngineError", "default_registry"]

DEFAULT_ENGINE = "spark"
SCHEDULER_LAUNCHED = {"spark-submit": DEFAULT_ENGINE, "spark-worker": DEFAULT_ENGINE}
"""What the scheduler launches for the engines operations ask for: resident workers claim
their attempts themselves, so an attempt the scheduler launches runs through spark-submit
(a `spark-worker` operation that needs its own JVM, with the reason on its attempt)."""


class UnknownEngineError(LaunchError):
    """No engine of that name here: the operation cannot run on this service."""

    def __init__(self, name: str, known: list[str]) -> None:
        shown = ", ".join(known) or "none"
        super().__init__(f"unknown execution engine {name!r} (known: {shown})", retryable=False)
        self.name = name


class EngineRegistry:
    """A small name → engine map; names are case-insensitive (RFC-43 sends `SPARK`)."""

    def __init__(self, engines: Mapping[str, Engine] | None = None) -> None:
        self._engines: dict[str, Engine] = {}
        for name, engine in (engines or {}).items():
            self.register(name, engine)

    def register(self, name: str, engine: Engine) -> None:
        self._engines[name.strip().lower()] = engine

    def get(self, name: str | None) -> Engine:
        key = (name or DEFAULT_ENGINE).strip().lower()
        key = SCHEDULER_LAUNCHED.get(key, key)
        try:
            return self._engines[key]
        except KeyError:
            raise UnknownEngineError(key, self.names()) from None

    def names(self) -> list[str]:
        return sorted(self._engines)


def default_registry(settings: Settings) -> EngineRegistry:
    """The engines a service instance offers: spark-submit."""
    return EngineRegistry({DEFAULT_ENGINE: SparkSubmitEngine(settings)})
