"""What `tms demo` is asked to do, and its refusal of options it cannot run with: below the
checks, the S3 server and the run, which all read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DemoOptions", "DemoRefused"]


@dataclass(frozen=True)
class DemoOptions:
    base_path: Path = Path(".tms/demo/trips")
    data_dir: Path = Path(".tms/demo-service")
    rows: int = 20_000
    rounds: int = 2
    commits_per_compaction: int = 3
    master: str = "local[*]"
    table_version: int = 9
    metadata_table: bool = True
    """A metadata table (`files`, `record_index`), as Hudi writers enable by default."""
    wait_seconds: float = 600.0
    poll_seconds: float = 0.5
    storage: str = "local"
    """`local` (under `base_path`) or `s3`: a local S3 server (`tms.demo.s3`), the table
    registered with its storage options."""
    engine: str = "spark-worker"
    """`spark-worker`: the service starts a resident Spark worker that runs the table
    services; `spark-submit`: one Spark application per attempt."""
    keep_running: bool = False
    """After the report, keep the service up until Ctrl-C or SIGTERM, then stop it."""
    worker_start_seconds: float = 180.0
    """How long the demo waits for the resident worker (its SparkSession) before it writes;
    without one by then, the table services run through spark-submit."""


class DemoRefused(ValueError):
    """The demo cannot run with these options; the message is one line saying why."""
