"""The spark-submit command, its environment, and the process it starts."""

from __future__ import annotations

import os
import stat
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tms.config import SettingsError, load_settings
from tms.config.spark_conf import allow_list
from tms.engines import LaunchError, LaunchSpec
from tms.engines.process import tail_log
from tms.engines.spark_submit import (
    ENTRY_SCRIPT,
    Memory,
    SparkSubmitEngine,
    SubmitOptions,
    build_argv,
    build_env,
    parse_resource,
    spark_home,
    split_extra_params,
)
from tms.spark_runtime.hudi_bundle import hudi_spark_conf
from tms.spark_runtime.package import package_zip

TOKEN = "s3cret-token"


def spec(tmp_path: Path, **kwargs: Any) -> LaunchSpec:
    values: dict[str, Any] = {
        "operation_id": 7,
        "attempt_id": 42,
        "action": "compaction",
        "api_url": "http://tms:9091",
        "token": TOKEN,
        "log_path": tmp_path / "logs" / "7" / "42.log",
    }
    values.update(kwargs)
    return LaunchSpec(**values)


def options(master: str, py_files: str | None = None) -> SubmitOptions:
    return SubmitOptions("/spark/bin/spark-submit", master, "/tms/jobs/entry.py", py_files)


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_local_master(tmp_path: Path) -> None:
    argv = build_argv(spec(tmp_path), options("local[*]"))
    assert argv == [
        "/spark/bin/spark-submit",
        "--master",
        "local[*]",
        "--name",
        "tms-compaction-op7-a42",
        "--conf",
        "spark.log.level=WARN",
        "/tms/jobs/entry.py",
        "--attempt-id",
        "42",
    ]
    assert TOKEN not in " ".join(argv) and repr(TOKEN) not in repr(spec(tmp_path))


def test_yarn_master_with_resource_queue_parallelism_and_confs(tmp_path: Path) -> None:
    launch = spec(
        tmp_path,
        queue="etl",
        resource="4g:2g",
        parallelism=8,
        extra_params={
            "spark.executor.cores": 2,
            "spark.dynamicAllocation.enabled": True,
            "spark.log.level": "INFO",
            "strategy": "log-size",
        },
    )
    argv = build_argv(launch, options("yarn", "/data/tms-abc.zip"))
    assert pairs(argv, "--master") == ["yarn"]
    assert pairs(argv, "--queue") == ["etl"]
    assert pairs(argv, "--driver-memory") == ["4g"] and pairs(argv, "--executor-memory") == ["2g"]
    assert pairs(argv, "--py-files") == ["/data/tms-abc.zip"]
    assert pairs(argv, "--conf") == [
        "spark.log.level=INFO",  # the operator's value wins over our default
        "spark.default.parallelism=8",
        "spark.executor.cores=2",
        "spark.dynamicAllocation.enabled=true",
    ]
    assert "strategy" not in " ".join(argv)  # job parameters travel in the spec, not argv
    assert argv[-3:] == ["/tms/jobs/entry.py", "--attempt-id", "42"]


def test_k8s_master_ships_the_package_without_a_yarn_queue(tmp_path: Path) -> None:
    launch = spec(
        tmp_path,
        queue="etl",
        extra_params={"spark.kubernetes.container.image": "tms:1"},
    )
    # The image is code: only an administrator's extra entry lets it through.
    settings = load_settings(
        config_file=False,
        environ={"TMS_SPARK_CONF_ALLOWED_EXTRA": "spark.kubernetes.container.image"},
    )
    cluster = SubmitOptions(
        "/spark/bin/spark-submit",
        "k8s://https://kube:6443",
        "/tms/jobs/entry.py",
        "/data/tms.zip",
        allowed=allow_list(settings),
    )
    with pytest.raises(LaunchError, match=r"spark\.kubernetes\.container\.image is not allowed"):
        build_argv(launch, options("k8s://https://kube:6443", "/data/tms.zip"))
    argv = build_argv(launch, cluster)
    assert "--queue" not in argv
    assert pairs(argv, "--py-files") == ["/data/tms.zip"]
    assert "spark.kubernetes.container.image=tms:1" in pairs(argv, "--conf")


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (None, None),
        ("", None),
        ("4g:2g", Memory("4g", "2g")),
        ("4G", Memory("4g", "4g")),
        ("spark:4g,4g", Memory("4g", "4g")),  # the Hudi client's default
        ("spark:8g", Memory("8g", "8g")),
        (" 512m : 1024m ", Memory("512m", "1024m")),
        ("4gb:1g", Memory("4gb", "1g")),
    ],
)
def test_parse_resource(resource: str | None, expected: Memory | None) -> None:
    assert parse_resource(resource) == expected


@pytest.mark.parametrize("resource", ["lots", "4g:2g:1g", "-4g", "4x:4g", "spark:"])
def test_bad_resource_is_not_retryable(resource: str) -> None:
    with pytest.raises(LaunchError) as info:
        parse_resource(resource)
    assert not info.value.retryable


@pytest.mark.parametrize(
    "extra",
    [
        {"spark.pyspark.driver.python": "/usr/bin/id"},
        {"spark.jars": "/tmp/evil.jar", "spark.executor.cores": "2"},
        {"spark.plugins": "com.evil.Plugin"},
        {"spark.driver.extraJavaOptions": "-javaagent:/tmp/a.jar"},
        {"spark.executor.extraJavaOptions": "-Dx=1", "spark.files": "/etc/passwd"},
    ],
)
def test_a_spark_setting_off_the_allow_list_is_refused_at_launch(
    tmp_path: Path, extra: dict[str, str]
) -> None:
    """A row stored before the allow-list (or by an older instance) never reaches
    spark-submit: the launch fails, for good, naming the key."""
    with pytest.raises(LaunchError) as info:
        build_argv(spec(tmp_path, extra_params=extra), options("local[2]"))
    assert not info.value.retryable
    refused = sorted(k for k in extra if k != "spark.executor.cores")
    assert str(info.value).startswith(f"extra_params key {refused[0]} is not allowed")
    if len(refused) > 1:
        assert str(info.value).endswith("(and 1 more)")


def test_split_extra_params() -> None:
    conf, job = split_extra_params({"spark.a": 1, "spark.b": False, "retained": 3, "sparkx": 1})
    assert conf == {"spark.a": "1", "spark.b": "false"}
    assert job == {"retained": 3, "sparkx": 1}


def test_env_carries_the_token_and_not_the_service_secrets(tmp_path: Path) -> None:
    environ = {
        "PATH": "/bin",
        "TMS_DATABASE_URL": "postgresql://u:p@db/tms",
        "TMS_AUTH_TOKENS": "admin:x",
        "PYSPARK_PYTHON": "/opt/py",
    }
    env = build_env(spec(tmp_path), home=Path("/spark"), environ=environ, python="/venv/python")
    assert env["TMS_JOB_TOKEN"] == TOKEN and env["TMS_API_URL"] == "http://tms:9091"
    assert env["TMS_ATTEMPT_ID"] == "42"
    assert "TMS_DATABASE_URL" not in env and "TMS_AUTH_TOKENS" not in env
    assert env["PYSPARK_DRIVER_PYTHON"] == "/venv/python"
    assert env["PYSPARK_PYTHON"] == "/opt/py"  # a cluster's executor Python is kept
    assert env["SPARK_HOME"] == "/spark" and env["PATH"] == "/bin"
    assert (
        build_env(spec(tmp_path), home=Path("/s"), environ={}, python="/p")["PYSPARK_PYTHON"]
        == "/p"
    )


def test_spark_home_resolution(tmp_path: Path) -> None:
    assert spark_home(tmp_path, {"SPARK_HOME": "/other"}) == tmp_path
    assert spark_home(None, {"SPARK_HOME": "/other"}) == Path("/other")
    installed = spark_home(None, {})
    assert (installed / "bin" / "spark-submit").is_file()  # the installed PySpark
    assert ENTRY_SCRIPT.is_file()


def test_engine_options_ship_a_zip_of_tms_for_cluster_masters(tmp_path: Path) -> None:
    local = load_settings(config_file=False, environ={}, data_dir=tmp_path)
    assert SparkSubmitEngine(local).options().py_files is None
    yarn = load_settings(config_file=False, environ={}, data_dir=tmp_path, spark_master="yarn")
    shipped = SparkSubmitEngine(yarn).options().py_files
    assert shipped is not None and Path(shipped).parent == tmp_path / "py-files"
    names = zipfile.ZipFile(shipped).namelist()
    assert "tms/jobs/entry.py" in names and "tms/hudi/avro/avsc/HoodieCompactionPlan.avsc" in names
    assert not any("__pycache__" in n for n in names)
    assert package_zip(tmp_path / "py-files") == Path(shipped)  # same content, same file


def fake_spark_home(tmp_path: Path) -> Path:
    """A spark-submit that logs what it got, starts a child, and waits (like the JVM)."""
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(
        "#!/bin/sh\n"
        'echo "args: $*"\n'
        'echo "token set: ${TMS_JOB_TOKEN:+yes}, db url: ${TMS_DATABASE_URL:-unset}"\n'
        "sleep 300 &\n"
        'echo "child $!" > "$CHILD_FILE_FOR_TEST"\n'
        "wait\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return home


def test_launch_logs_to_the_attempt_file_and_kill_takes_the_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child_file = tmp_path / "child"
    monkeypatch.setenv("CHILD_FILE_FOR_TEST", str(child_file))
    monkeypatch.setenv("TMS_DATABASE_URL", "postgresql://u:secret@db/tms")
    home = fake_spark_home(tmp_path)
    settings = load_settings(config_file=False, environ={}, data_dir=tmp_path, spark_home=home)
    launch = spec(tmp_path)
    handle = SparkSubmitEngine(settings).launch(launch)
    try:
        deadline = time.monotonic() + 10
        while not child_file.is_file() or not child_file.read_text().strip():
            assert time.monotonic() < deadline, "the fake spark-submit never started its child"
            time.sleep(0.05)
        child = int(child_file.read_text().split()[1])
        assert handle.poll() is None and handle.pid is not None
        assert handle.log_path == launch.log_path
    finally:
        handle.kill()
    assert handle.poll() == -9
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    log = launch.log_path.read_text()
    assert log.startswith(f"# tms attempt 42: {home}/bin/spark-submit --master 'local[*]'")
    assert "args: --master local[*] --name tms-compaction-op7-a42" in log
    assert "token set: yes, db url: unset" in log and TOKEN not in log
    handle.kill()  # twice is fine


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat_file:  # a zombie counts as gone
        return stat_file.read().split()[2] != "Z"


def test_tail_log(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert tail_log(log, lines=3) == "line 997\nline 998\nline 999"
    assert tail_log(log, lines=1000, max_bytes=30).splitlines()[0] == "line 997"
    assert tail_log(tmp_path / "missing.log") == "" and tail_log(None) == ""


def test_hudis_bundle_and_its_configs_go_on_every_job(
    tmp_path: Path,
) -> None:
    """The `hudi` executor runs in the job's Spark: its bundle must be there from launch."""
    hudi = SubmitOptions(
        "/spark/bin/spark-submit",
        "local[*]",
        "/tms/jobs/entry.py",
        hudi_conf=hudi_spark_conf(["/cache/hudi-spark3.5-bundle_2.12-1.2.0.jar"]),
    )
    launch = spec(tmp_path, extra_params={"spark.executor.memory": "2g"})
    confs = pairs(build_argv(launch, hudi), "--conf")
    assert "spark.jars=/cache/hudi-spark3.5-bundle_2.12-1.2.0.jar" in confs
    assert "spark.sql.extensions=org.apache.spark.sql.hudi.HoodieSparkSessionExtension" in confs
    assert "spark.serializer=org.apache.spark.serializer.KryoSerializer" in confs
    assert "spark.executor.memory=2g" in confs
    without = pairs(build_argv(launch, options("local")), "--conf")
    assert not any(c.startswith("spark.jars") for c in without)


def test_the_task_memory_setting_reaches_every_job_and_an_operation_may_set_its_own(
    tmp_path: Path,
) -> None:
    unset = load_settings(config_file=False, environ={}, data_dir=tmp_path)
    argv = build_argv(spec(tmp_path), SparkSubmitEngine(unset).options())
    assert not any(arg.startswith("spark.tms.task.memory=") for arg in argv)
    settings = load_settings(
        config_file=False, environ={"TMS_TASK_MEMORY": "512m"}, data_dir=tmp_path
    )
    options = SparkSubmitEngine(settings).options()
    assert "spark.tms.task.memory=512m" in build_argv(spec(tmp_path), options)
    own = spec(tmp_path, extra_params={"spark.tms.task.memory": "2g"})
    argv = build_argv(own, options)
    assert "spark.tms.task.memory=2g" in argv and "spark.tms.task.memory=512m" not in argv
    with pytest.raises(SettingsError, match="TMS_TASK_MEMORY"):
        load_settings(config_file=False, environ={"TMS_TASK_MEMORY": "lots"}, data_dir=tmp_path)
