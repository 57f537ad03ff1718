"""A Spark standalone cluster on this machine: a master and workers as child processes of the
test (the Spark that PySpark ships), each worker's executors in JVMs of their own, and the
loss of a worker while its tasks run.

Workers start with `TMS_TASK_PAUSE_DIR` (`tms.testing.task_pause`) in their environment,
which their executors inherit: every task attempt leaves a file in `pause_dir` once its work
is written, and a first attempt waits there until `release()`. `kill_worker_of(task)` then
SIGKILLs the worker that runs that task, with its executor and the executor's Python
workers, as a lost machine would lose them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tms.hudi.table import HudiTable
from tms.spark_runtime import ensure_java
from tms.testing.task_pause import ENV as PAUSE_ENV
from tms.testing.task_pause import RELEASE

START_TIMEOUT = 120.0
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _parent(int(entry.name)) == pid:
            found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def table_files(base_path: str) -> set[str]:
    """Paths (relative to the table) of its files and its metadata table's, markers not."""
    root = Path(base_path)
    found = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if path.is_file() and ".temp" not in relative.parts and ".marker." not in path.name:
            found.add(str(relative))
    return found


def written_by(path: str, tokens: set[str]) -> bool:
    """Whether a file's name carries one of these write tokens: Hudi names a base file
    `<id>_<token>_<instant>.<ext>` and a log file `.<id>_<instant>.log.<n>_<token>`."""
    name = path.rpartition("/")[2]
    return any(f"_{t}_" in name or name.endswith(f"_{t}") for t in tokens)


def committed_files(base_path: str) -> set[str]:
    """Paths (relative to the table) that the completed writes of the table and of its
    metadata table name in their commit metadata."""
    paths: set[str] = set()
    tables = {base_path: ""}
    if (Path(base_path) / ".hoodie" / "metadata" / ".hoodie").is_dir():
        tables[f"{base_path}/.hoodie/metadata"] = ".hoodie/metadata/"
    for base, prefix in tables.items():
        table = HudiTable.open(base)
        timeline = table.timeline()
        for instant in timeline.commits():
            written = timeline.commit_metadata(instant).file_paths_written()
            paths.update(prefix + path for path in written)
    return paths


@dataclass(frozen=True)
class PausedTask:
    """A task attempt's file in the pause folder (`tms.testing.task_pause`)."""

    stage: int
    partition: int
    attempt_number: int
    write_token: str
    pid: int

    @classmethod
    def parse(cls, name: str) -> PausedTask:
        # the write token is `partition-stage-task attempt id`: three parts of its own
        parts = name.removesuffix(".task").split("-")
        stage, partition, number, pid = parts[0], parts[1], parts[2], parts[-1]
        token = "-".join(parts[3:-1])
        return cls(int(stage), int(partition), int(number), token, int(pid))


class SparkCluster:
    """A master and `workers` workers (`cores` cores, 1 GiB each) on 127.0.0.1."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1) -> None:
        self.root = root
        self.pause_dir = root / "pause"
        self.pause_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.ui_port = _free_port()
        self.cores = cores
        self.master_process: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self._worker_count = workers
        ensure_java()
        home = spark_home()
        self._spark_class = str(home / "bin" / "spark-class")
        self.env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_DIRS": str(root / "local"),
            "SPARK_LOG_DIR": str(root / "logs"),
            PAUSE_ENV: str(self.pause_dir),
        }

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.root / f"{name}.log").open("ab")
        with log:
            return subprocess.Popen(
                [self._spark_class, *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    def start(self) -> SparkCluster:
        self.master_process = self._start(
            "master",
            [
                MASTER,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        for _ in range(self._worker_count):
            self.start_worker()
        return self

    def start_worker(self) -> None:
        """One more worker; waits until the master counts it alive."""
        n = len(self.workers)
        work = self.root / f"work-{n}"
        work.mkdir(parents=True, exist_ok=True)
        args = [WORKER, self.master_url, "--host", "127.0.0.1", "--webui-port", "0"]
        args += ["--cores", str(self.cores), "--memory", "1g", "--work-dir", str(work)]
        self.workers.append(self._start(f"worker-{n}", args))
        self.wait_for_workers(sum(1 for w in self.workers if w.poll() is None))

    def master_state(self) -> dict[str, object]:
        response = httpx.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5.0)
        state: dict[str, object] = response.json()
        return state

    def wait_for_workers(self, alive: int, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last: object = "no answer"
        while time.monotonic() < deadline:
            if self.master_process is not None and self.master_process.poll() is not None:
                raise AssertionError(f"the Spark master exited:\n{self.log_tail('master')}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                workers = self.master_state().get("workers", [])
                assert isinstance(workers, list)
                last = [w.get("state") for w in workers]
                if sum(1 for w in workers if w.get("state") == "ALIVE") >= alive:
                    return
            time.sleep(0.2)
        raise AssertionError(f"{alive} Spark workers not alive after {timeout:g}s: {last}")

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])

    # Paused tasks --------------------------------------------------------------------------

    def tasks(self) -> list[PausedTask]:
        """Every task attempt that reached the pause (those of later attempts too)."""
        return [PausedTask.parse(p.name) for p in sorted(self.pause_dir.glob("*.task"))]

    def wait_for_paused_task(
        self, timeout: float, check: Callable[[], None] | None = None
    ) -> PausedTask:
        """The first task attempt that waits in the pause (a first attempt); `check` raises
        when waiting is pointless (the job ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            paused = [t for t in self.tasks() if t.attempt_number == 0]
            if paused:
                return paused[0]
            if check is not None:
                check()
            time.sleep(0.05)
        raise AssertionError(f"no Spark task reached the pause in {timeout:g}s")

    def reruns(self, task: PausedTask) -> list[PausedTask]:
        """The later attempts of `task` that reached the pause: the same partition of the
        same stage, another write token (a task set Spark submits again after a lost
        shuffle output numbers its attempts from 0 again)."""
        return [
            t
            for t in self.tasks()
            if (t.stage, t.partition) == (task.stage, task.partition)
            and t.write_token != task.write_token
        ]

    def release(self) -> None:
        (self.pause_dir / RELEASE).write_text("")

    def hold(self) -> None:
        """First attempts wait again (for the next run)."""
        (self.pause_dir / RELEASE).unlink(missing_ok=True)
        for path in self.pause_dir.glob("*.task"):
            path.unlink()

    def worker_of(self, pid: int) -> subprocess.Popen[bytes]:
        """The worker whose executor runs process `pid` (a task's Python worker)."""
        by_pid = {w.pid: w for w in self.workers if w.poll() is None}
        current: int | None = pid
        while current is not None and current > 1:
            if current in by_pid:
                return by_pid[current]
            current = _parent(current)
        raise AssertionError(f"process {pid} runs under no live Spark worker")

    def kill_worker_of(self, task: PausedTask) -> list[int]:
        """SIGKILL the worker running `task` with everything it started (its executor JVM,
        the executor's Python daemon and workers); the pids killed."""
        worker = self.worker_of(task.pid)
        doomed = [worker.pid, *_descendants(worker.pid)]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.wait(timeout=30)
        return doomed

    def close(self) -> None:
        for process in [*self.workers, self.master_process]:
            if process is None:
                continue
            doomed = [process.pid, *_descendants(process.pid)] if process.poll() is None else []
            for pid in doomed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
