"""`tms serve` as users run it: a subprocess per service instance, on a free port, against the
test's own PostgreSQL database (`db_url`), with settings sized for tests.

`services.start("a", compaction_delta_commits=3)` starts an instance (keyword arguments are
settings, passed as `TMS_*` environment variables) and waits for `/readyz`. Every instance is
stopped at teardown, together with any Spark job it launched (jobs run in their own process
groups and would outlive it). When a test fails, the end of every server log and job log is
printed with the failure.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# Settings every e2e instance runs with (see the module docstring of tms.config):
# a fast scheduler, short leases and heartbeats, quick deterministic retries, one Spark core.
TEST_SETTINGS: dict[str, str] = {
    "scheduler_interval_seconds": "0.2",
    # 20 s, not 10: the lease starts at the claim, and on this loaded 2-core machine
    # spark-submit took up to ~11 s to start the job's first heartbeat, so 10 s leases made
    # healthy jobs LOST at random. The lease tests pass a shorter one explicitly.
    "lease_seconds": "20",
    "heartbeat_interval_seconds": "2",
    "retry_base_seconds": "1",
    "retry_factor": "2",
    "retry_max_seconds": "30",
    "retry_jitter": "0",
    "spark_master": "local[1]",
    "max_running_per_instance": "1",
    "default_max_retries": "3",
    # Policies off unless a test turns one on: no operation appears that a test did not ask for.
    "compaction_delta_commits": "0",
    "clean_commits": "0",
    "db_pool_size": "4",
}
SERVE = [sys.executable, "-m", "tms", "serve"]
READY_TIMEOUT = 90.0
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "INVALID"})

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 80) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def job_processes(api_url: str, attempt_id: int | None = None) -> list[int]:
    """Pids of the Spark job processes (spark-submit JVM, Python driver, workers) that were
    launched to report to `api_url` (for one attempt, when given)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = _environ(int(entry.name))
        if env.get("TMS_API_URL") != api_url:
            continue
        if attempt_id is not None and env.get("TMS_ATTEMPT_ID") != str(attempt_id):
            continue
        pids.append(int(entry.name))
    return pids


def kill_job_processes(api_url: str, attempt_id: int | None = None) -> list[int]:
    """SIGKILL the process groups of the jobs `job_processes` finds; the groups killed."""
    groups: set[int] = set()
    for pid in job_processes(api_url, attempt_id):
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return sorted(groups)


class ServiceDied(AssertionError):
    pass


class Service:
    """One `tms serve` instance; its state (logs) lives in `data_dir`, kept over restarts."""

    def __init__(self, name: str, db_url: str, data_dir: Path, settings: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.data_dir = data_dir
        self.log_dir = data_dir / "logs"
        self.server_log = data_dir / "server.log"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
        # The pull fallback reads timelines on its own schedule; tests that pull turn it on.
        settings = {"pull_listings_per_minute": "0", **settings}
        env |= {f"TMS_{key.upper()}": value for key, value in settings.items()}
        env |= {
            "TMS_DATABASE_URL": db_url,
            "TMS_DATA_DIR": str(data_dir),
            "TMS_LOG_DIR": str(self.log_dir),
            "PYTHONUNBUFFERED": "1",
            # Spark's scratch directories, which a killed job cannot remove: under the test's.
            "SPARK_LOCAL_DIRS": str(data_dir / "spark-local"),
        }
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # Life cycle -----------------------------------------------------------------------

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Start the server (again, on the same port and database) and wait until ready.
        Its working directory is `data_dir`, so no `conf/tms.toml` is read."""
        assert not self.alive, f"service {self.name} is already running"
        with self.server_log.open("ab") as log:
            log.write(f"\n===== tms serve ({self.name}) on port {self.port} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [*SERVE, "--host", "127.0.0.1", "--port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not self.alive:
                raise ServiceDied(
                    f"tms serve ({self.name}) exited with {self.process and self.process.poll()}"
                    f" before it was ready:\n{tail(self.server_log)}"
                )
            try:
                response = self.http.get("/readyz", timeout=2.0)
                if response.status_code == 200:
                    return
                last = f"{response.status_code} {response.text}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.1)
        raise AssertionError(
            f"tms serve ({self.name}) not ready after {timeout:g}s ({last}):\n"
            f"{tail(self.server_log)}"
        )

    def kill(self) -> None:
        """SIGKILL the server process, as a crash would (its jobs live on, in their own
        process groups, and carry on under their leases)."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; then end the jobs it launched."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        kill_job_processes(self.url)

    def close(self) -> None:
        self.stop()
        self.http.close()

    # The API ------------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.http.post(path, json=body)
        assert response.is_success, f"POST {path}: {response.status_code} {response.text}"
        return response.json()

    def operation(self, operation_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self.get(f"/v1/operations/{operation_id}")
        return result

    def attempts(self, operation_id: int) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get(f"/v1/operations/{operation_id}/attempts")
        return result

    def operations(self, **filters: Any) -> list[dict[str, Any]]:
        """Every operation matching the filters (all pages), oldest first."""
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            params = {**filters, "limit": 500}
            if cursor is not None:
                params["cursor"] = cursor
            page = self.get("/v1/operations", **params)
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return sorted(items, key=lambda op: op["id"])

    def wait_for(
        self,
        what: str,
        condition: Callable[[], Any],
        timeout: float,
        interval: float = 0.25,
    ) -> Any:
        """Poll `condition()` until it returns something truthy; fail naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            if not self.alive:
                raise ServiceDied(f"tms serve ({self.name}) died:\n{tail(self.server_log)}")
            time.sleep(interval)

    def wait_terminal(self, operation_id: int, timeout: float) -> dict[str, Any]:
        """The operation once it reached a terminal status."""

        def done() -> dict[str, Any] | None:
            operation = self.operation(operation_id)
            return operation if operation["status"] in TERMINAL else None

        result: dict[str, Any] = self.wait_for(f"operation {operation_id} to finish", done, timeout)
        return result

    def job_logs(self) -> list[Path]:
        return sorted(self.log_dir.rglob("*.log")) if self.log_dir.is_dir() else []


class Services:
    """Starts `tms serve` instances for one test, all on its database."""

    def __init__(self, db_url: str, root: Path) -> None:
        self.db_url = db_url
        self.root = root
        self.started: dict[str, Service] = {}

    def start(self, name: str = "a", **settings: Any) -> Service:
        values = dict(TEST_SETTINGS)
        values |= {key: str(value) for key, value in settings.items()}
        service = Service(name, self.db_url, self.root / name, values)
        self.started[name] = service
        service.start()
        return service

    def report(self) -> str:
        parts = []
        for service in self.started.values():
            parts.append(f"----- server log of {service.name} ({service.server_log}) -----")
            parts.append(tail(service.server_log, 150))
            for log in service.job_logs()[-12:]:
                parts.append(f"----- job log {log} -----")
                parts.append(tail(log, 40))
        return "\n".join(parts)

    def close(self) -> None:
        for service in self.started.values():
            service.close()


@pytest.fixture
def services(request: pytest.FixtureRequest, db_url: str, tmp_path: Path) -> Iterator[Services]:
    """`tms serve` instances on this test's database; stopped (with their jobs) at the end."""
    started = Services(db_url, tmp_path / "services")
    try:
        yield started
    finally:
        reports = request.node.stash.get(_REPORTS, {})
        if any(report.failed for report in reports.values()):
            print(started.report())  # shown with the failure ("Captured stdout teardown")
        started.close()
