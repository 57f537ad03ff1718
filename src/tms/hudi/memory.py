"""A task's memory budget, as the table layer sees it: a number of bytes of records one task
may hold at once (what the runtime's budget of its Python worker leaves them), kept by
spilling to the task's local disk (`task_workdir`; `tms.hudi.files.spilled_slice`). Where
the number comes from (Spark's settings, the service's) is the runtime's business
(`tms.spark_runtime.task_memory`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

__all__ = ["DEFAULT_RECORDS", "TaskMemoryExceeded", "read_spilled", "task_workdir"]

DEFAULT_RECORDS = int((1024 - 176) * 2**20 * 0.7)
"""The records a task the table layer runs with no budget given may hold: those the runtime
gives a task of its default budget (`tms.spark_runtime.task_memory.records_budget` of
`DEFAULT_BUDGET`, 1 GiB: it may not import this layer; a test keeps the two equal)."""


class TaskMemoryExceeded(RuntimeError):
    """One unit the task cannot split (the versions of one record key) is larger than the
    budget: the task stops with this instead of growing until its container is killed."""

    def __init__(self, what: str, needed: int, budget: int, remedy: str = "") -> None:
        self.what = what
        self.needed = needed
        self.budget = budget
        self.remedy = remedy
        message = (
            f"{what} needs {_size(needed)} in memory, over the {_size(budget)} the task "
            "memory budget gives a task's records"
        )
        super().__init__(f"{message}: {remedy}" if remedy else message)

    def with_remedy(self, remedy: str) -> TaskMemoryExceeded:
        """The same refusal, saying what the user can do (the setting to raise)."""
        return TaskMemoryExceeded(self.what, self.needed, self.budget, remedy)


def _size(count: int) -> str:
    if count < 2**20:
        return f"{count / 2**10:.0f} KiB"
    return f"{count / 2**20:.1f} MiB"


def _local_dir() -> str | None:
    """Spark's local folder on this executor (YARN's and Kubernetes' ones included)."""
    for name in ("SPARK_LOCAL_DIRS", "LOCAL_DIRS"):
        first = os.environ.get(name, "").split(",")[0].strip()
        if first and os.path.isdir(first):
            return first
    return None


@contextmanager
def task_workdir() -> Iterator[str]:
    """A fresh folder on the executor's local disk for one task's spill and copies; gone
    when the task ends, however it ends."""
    with tempfile.TemporaryDirectory(prefix="tms-task-", dir=_local_dir()) as folder:
        yield folder


def read_spilled(path: str | os.PathLike[str]) -> pa.ipc.RecordBatchStreamReader:
    """An Arrow IPC stream the task spilled to its local disk, read through the file: each
    batch is copied into memory as it is read. Never memory-mapped (pyarrow maps a stream it
    is given by path): mapped pages count in the process's resident memory, which YARN's and
    Kubernetes' limits watch, and merging runs touches every page of them."""
    return pa.ipc.open_stream(pa.OSFile(os.fspath(path)))
