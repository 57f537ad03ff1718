"""How jobs are launched: the `Engine` protocol, engines by name, and spark-submit."""

from tms.engines.base import Engine, JobHandle, LaunchError, LaunchSpec
from tms.engines.engine_names import (
    DEFAULT_ENGINE,
    EngineRegistry,
    UnknownEngineError,
    default_registry,
)

__all__ = [
    "DEFAULT_ENGINE",
    "Engine",
    "EngineRegistry",
    "JobHandle",
    "LaunchError",
    "LaunchSpec",
    "UnknownEngineError",
    "default_registry",
]
