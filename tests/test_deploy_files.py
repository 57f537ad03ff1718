"""The deployment files parse and agree with the code: every `TMS_*` variable they set is a
setting the service reads (and its value loads), ports and the Prometheus target match, and
what the Dockerfile copies exists. No Docker engine runs here, so this is all we can check."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from tms.api.routes import health
from tms.config import ENV_PREFIX, Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
PORT = 9091


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the Dockerfile"
    return [(head.upper(), rest.strip()) for head, _, rest in (x.partition(" ") for x in logical)]


def exec_form(text: str) -> list[str]:
    """`CMD ["a", "b"]`'s JSON list."""
    value = json.loads(text)
    assert isinstance(value, list), f"{text!r} is not the exec (JSON list) form"
    return [str(v) for v in value]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in dockerfile_instructions():
        if instruction == "ENV":
            for pair in shlex.split(args):
                key, sep, value = pair.partition("=")
                assert sep, f"ENV {pair!r}: use the KEY=value form"
                env[key] = value
    return env


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def interpolate(value: str) -> str:
    """Compose's `${NAME:-default}` / `${NAME}` as they resolve with nothing set."""
    return re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}", lambda m: m.group(2) or "", value)


def compose_env(service: str) -> dict[str, str]:
    env = compose()["services"][service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): interpolate(str(v)) for k, v in env.items()}


def tms_variables(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}


def assert_real_settings(env: dict[str, str], where: str) -> Settings:
    fields = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(set(tms_variables(env)) - fields)
    assert not unknown, f"{where} sets variables the service does not read: {unknown}"
    return load_settings(config_file=False, environ=tms_variables(env))


def test_dockerfile_sets_only_real_settings_and_serves_on_all_interfaces() -> None:
    env = dockerfile_env()
    settings = assert_real_settings(env, "Dockerfile")
    assert (settings.host, settings.port) == ("0.0.0.0", PORT)
    assert settings.database_url is None  # no URL baked in: the deployment supplies it

    steps = dockerfile_instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    run = " ".join(args for instruction, args in steps if instruction == "RUN")
    assert re.search(r"openjdk-\d+-jre", run) and "pip install ." in run
    assert ("EXPOSE", str(PORT)) in steps
    cmd = [args for instruction, args in steps if instruction == "CMD"][-1]
    assert exec_form(cmd) == ["tms", "serve", "--host", "0.0.0.0"]


def test_dockerfile_copies_what_exists_and_what_the_service_reads_at_start() -> None:
    copied: list[str] = []
    for instruction, args in dockerfile_instructions():
        if instruction == "COPY":
            *sources, _ = args.split()
            copied += sources
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the checkout"
    # `pip install .` needs the project and its readme; `tms serve` migrates from ./migrations.
    assert {"pyproject.toml", "README.md", "src", "migrations", "conf"} <= set(copied)
    workdir = [args for instruction, args in dockerfile_instructions() if instruction == "WORKDIR"]
    assert workdir, "a WORKDIR makes ./migrations resolve"


def test_compose_tms_service_sets_only_real_settings() -> None:
    env = compose_env("tms")
    settings = assert_real_settings(env, "docker-compose.yml (tms)")
    assert settings.database_url is not None and "@postgres:5432/" in settings.database_url
    assert (settings.host, settings.port) == ("0.0.0.0", PORT)
    assert not settings.auth_enabled  # TMS_AUTH_TOKENS defaults to empty: auth off
    assert settings.api_url == f"http://tms:{PORT}"

    postgres = compose_env("postgres")
    user, password, db = (
        postgres[k] for k in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB")
    )
    assert settings.database_url == f"postgresql+psycopg://{user}:{password}@postgres:5432/{db}"


def test_compose_ports_and_dependencies_agree() -> None:
    services = compose()["services"]
    assert set(services) == {
        "postgres",
        "tms",
        "spark-master",
        "spark-worker",
        "prometheus",
        "grafana",
    }
    tms = services["tms"]
    assert f"{PORT}:{PORT}" in tms["ports"]
    assert tms["build"] == "."
    assert tms["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "prometheus" in services["prometheus"]["image"]
    mounts = services["prometheus"]["volumes"]
    assert "./conf/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]


def test_every_pulled_image_is_pinned_to_a_version() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            continue
        image = service["image"]
        _, _, tag = image.rpartition(":")
        assert tag and tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image}"


def test_jobs_run_on_the_compose_spark_cluster_of_the_images_own_spark() -> None:
    services = compose()["services"]
    settings = load_settings(config_file=False, environ=tms_variables(compose_env("tms")))
    assert settings.spark_master == "spark://spark-master:7077"
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["image"] == worker["image"] == services["tms"]["image"]  # one Spark version
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert master["command"][master["command"].index("--port") + 1] == "7077"
    assert worker["command"][:3] == [
        "spark-class",
        "org.apache.spark.deploy.worker.Worker",
        settings.spark_master,
    ]
    # The image's PySpark is Spark's home; executors read and write the tables where tms does.
    site = compose_env("spark-master")["SPARK_HOME"]
    assert site.endswith("/site-packages/pyspark") and "python3.11" in site
    assert "python:3.11" in dockerfile_instructions()[0][1]
    assert "./lake:/lake" in worker["volumes"] and "./lake:/lake" in services["tms"]["volumes"]
    assert services["tms"]["hostname"] == "tms"  # what executors connect back to


def test_grafana_is_provisioned_from_conf_grafana() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = grafana["volumes"]
    assert "./conf/grafana/provisioning:/etc/grafana/provisioning:ro" in mounts
    assert "./conf/grafana/dashboards:/var/lib/grafana/dashboards:ro" in mounts
    for mount in mounts:
        assert (ROOT / mount.split(":")[0]).is_dir(), mount
    datasources = yaml.safe_load(
        (ROOT / "conf/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    host = datasources["datasources"][0]["url"].split("//")[1].split(":")[0]
    assert host in compose()["services"]


def test_prometheus_scrapes_the_tms_metrics_endpoint() -> None:
    config = yaml.safe_load((ROOT / "conf" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["tms"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert "/metrics" in {getattr(r, "path", None) for r in health.router.routes}
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    assert targets == [f"tms:{PORT}"]  # the compose service name and its port
    host, _, port = targets[0].partition(":")
    assert host in compose()["services"]
    assert int(port) == load_settings(config_file=False, environ=compose_env("tms")).port


def test_settings_default_port_is_the_one_deployed() -> None:
    """9091 is the Hudi table-service-manager client's default; the files assume it."""
    assert Settings.model_fields["port"].default == PORT
