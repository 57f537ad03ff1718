"""Names of data files: base files, log files and write tokens, as Hudi writes them."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

PARTITION_METADATA = ".hoodie_partition_metadata"
_BASE_FILE = re.compile(
    r"^(?P<file_id>.+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{14,20})\.(?P<ext>[a-z]+)$"
)
_LOG_FILE = re.compile(
    r"^\.(?P<file_id>.+)_(?P<instant>\d{14,20})\.log\.(?P<version>\d+)(_(?P<token>\d+-\d+-\d+))?$"
)
DEFAULT_WRITE_TOKEN = "1-0-1"
"""Hudi's write token for files written outside a Spark task."""


def new_file_id(index: int = 0) -> str:
    """A new file group id: `<uuid>-<n>`, as Hudi's writers name them."""
    return f"{uuid.uuid4()}-{index}"


def write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


@dataclass(frozen=True, order=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str
    extension: str = "parquet"

    def __str__(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}.{self.extension}"

    @classmethod
    def parse(cls, name: str) -> BaseFileName | None:
        match = _BASE_FILE.match(name)
        if not match:
            return None
        return cls(match["file_id"], match["token"], match["instant"], match["ext"])


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    base_instant_time: str
    version: int
    write_token: str = DEFAULT_WRITE_TOKEN

    def __str__(self) -> str:
        return f".{self.file_id}_{self.base_instant_time}.log.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        match = _LOG_FILE.match(name)
        if not match:
            return None
        return cls(
            match["file_id"],
            match["instant"],
            int(match["version"]),
            match["token"] or DEFAULT_WRITE_TOKEN,
        )

    @property
    def sort_key(self) -> tuple[int, str]:
        """Log files of one slice in write order: version, then write token."""
        return (self.version, self.write_token)
