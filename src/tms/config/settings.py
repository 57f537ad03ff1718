"""The `Settings` model: every setting with its default, its description and its check.

Checks run when settings are built (`tms.config.loading`), so a bad value stops the service
at start-up with a message naming its environment variable.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NamedTuple

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tms.base_path import BasePathError, normalize_base_path
from tms.config.sources import ENV_PREFIX, current_sources
from tms.executor_choice import AUTO, ExecutorChoice, parse_executor
from tms.spark_runtime.task_memory import parse_size

__all__ = ["DEFAULT_CALLBACK_KEY", "AuthToken", "CallbackKey", "Role", "Settings"]

DEFAULT_CALLBACK_KEY = "hudi_write_commit_http_callback"
_PLACEHOLDER_SECRETS = frozenset({"changeme", "changethis", "secret", "token", "password"})
_URL_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SPARK_CONF_ENTRY = re.compile(r"^spark(\.[A-Za-z0-9_-]+)+(\.?\*)?$")
_SPARK_MASTER = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[.+\]|yarn|(spark|k8s|mesos)://.+)$"
)
_URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")


class Role(enum.StrEnum):
    """API roles: admins do everything, writers notify and submit, viewers read."""

    ADMIN = "admin"
    WRITER = "writer"
    VIEWER = "viewer"


class AuthToken(NamedTuple):
    """One bearer token and the role it grants (`role:token` in the setting)."""

    role: Role
    token: SecretStr


class CallbackKey(NamedTuple):
    """One accepted HUDI-CALLBACK-KEY and the base-path prefixes it may notify (none: any
    path); `key@prefix` entries of the setting, one per prefix."""

    key: SecretStr
    prefixes: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        """What logs may show of the key: the first 8 hex digits of its SHA-256."""
        return hashlib.sha256(self.key.get_secret_value().encode()).hexdigest()[:8]

    @property
    def is_public_default(self) -> bool:
        """Hudi's documented default key: anyone may know it."""
        return self.key.get_secret_value() == DEFAULT_CALLBACK_KEY


STORAGE_RETRY_SETTINGS = (
    "storage_retries",
    "storage_retry_base_seconds",
    "storage_retry_max_seconds",
    "storage_connect_timeout_seconds",
    "storage_read_timeout_seconds",
)
"""Settings `tms.hudi.storage` reads from the environment, in every process that opens a table."""


class Settings(BaseSettings):
    """Everything the service reads from its environment; build with `load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True
    )

    database_url: str | None = Field(
        None,
        description="PostgreSQL URL (`postgresql://user:pass@host:port/db`); "
        "unset = embedded PostgreSQL under `data_dir/pg`",
    )
    data_dir: Path = Field(
        Path("./.tms"), description="state of this instance: embedded database, logs"
    )
    db_pool_size: int = Field(10, ge=1, description="database connections per instance")
    db_connect_timeout_seconds: int = Field(
        5, ge=2, description="longest wait for a new database connection (libpq's minimum is 2)"
    )
    db_statement_timeout_seconds: float = Field(
        30.0,
        ge=0,
        description="longest database statement (server-side `statement_timeout`; then 503); "
        "0 = no limit",
    )
    db_pool_timeout_seconds: float = Field(
        10.0, gt=0, description="longest wait for a free pooled connection (then 503)"
    )
    host: str = Field("127.0.0.1", min_length=1, description="address the API listens on")
    port: int = Field(9091, ge=1, le=65535, description="API port (the Hudi TMS client's default)")
    public_url: str | None = Field(
        None,
        description="URL Spark jobs use to reach the API; unset = `http://host:port` "
        "(127.0.0.1 when host is a wildcard address)",
    )
    # --- Callback keys and request limits -------------------------------------------------
    callback_keys: Annotated[tuple[CallbackKey, ...], NoDecode] = Field(
        (),
        description="accepted `HUDI-CALLBACK-KEY` values, comma-separated, each optionally "
        "scoped to base-path prefixes (`k1@/lake/a,k1@/lake/b,k2`: repeat a key for more "
        "prefixes; `k2` notifies any table); empty = Hudi's public default key "
        f"`{DEFAULT_CALLBACK_KEY}` while auth is off, no key with auth on (the default key "
        "then works only when listed). The service logs each key's SHA-256 fingerprint and "
        "prefixes at start",
    )
    max_request_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="largest request body of every route but the commit callback (413)",
    )
    max_callback_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1,
        description="largest commit callback body (413); a write stat of a real Hudi commit "
        "is 670–830 bytes, so a commit touching ~40,000 files fits. Its write stats are "
        "summed while the body is parsed: a callback costs at most about 3× its body in "
        "memory (docs/security.md)",
    )
    # --------------------------------------------------------------------------------------
    auth_tokens: Annotated[tuple[AuthToken, ...], NoDecode] = Field(
        (),
        description="bearer tokens as `role:token` pairs, comma-separated, roles admin, "
        "writer, viewer; empty = auth off",
    )
    auto_register: bool = Field(
        True, description="register unknown tables on their first commit callback"
    )
    spark_master: str = Field("local[*]", description="Spark master for jobs")
    spark_home: Path | None = Field(
        None, description="Spark installation to use; unset = the installed PySpark"
    )
    task_memory: str | None = Field(
        None,
        description="memory budget of each native Spark task's Python worker, interpreter "
        "included (`spark.tms.task.memory`: 512m, 1g, …): its records get the budget less "
        "176 MiB, seven tenths of the rest, and a file slice or clustering group larger than "
        "that is merged and sorted through the executor's local disk; unset = half of "
        "`spark.executor.pyspark.memory` per core when set, else 1g",
    )
    hudi_jars: str | None = Field(
        None,
        description="jars of Hudi's Spark bundle for the hudi executor, comma-separated; "
        "unset = the bundle in `TMS_HUDI_CACHE`, fetched there on first need",
    )
    hudi_cache: Path | None = Field(
        None,
        description="where Hudi's Spark bundle is kept once fetched; unset = `~/.cache/tms/hudi`",
    )
    hudi_fetch: bool = Field(
        True,
        description="fetch Hudi's Spark bundle on first need when `TMS_HUDI_JARS` names none "
        "and the cache has none (Spark's package resolution, else Maven when on PATH)",
    )
    hudi_repositories: str | None = Field(
        None,
        description="Maven repositories the bundle is fetched from, comma-separated "
        "(`spark.jars.repositories`: a mirror); unset = Maven Central and what Spark's "
        "`spark-defaults.conf` names",
    )
    hudi_ivy_settings: Path | None = Field(
        None,
        description="an Ivy settings file for the bundle's fetch (`spark.jars.ivySettings`: "
        "resolvers, credentials)",
    )
    scheduler_interval_seconds: float = Field(1.0, gt=0, description="scheduler tick period")
    max_running_per_instance: int = Field(
        2, ge=0, description="jobs one instance runs at once (0 = API only)"
    )
    queue_limits: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="running jobs per queue over all instances, e.g. `default:2,etl:4`; "
        "unlisted queues are unlimited, 0 pauses a queue",
    )
    lease_seconds: float = Field(
        60.0,
        gt=0,
        description="a job that has not heartbeat for this long is lost and retried; a job "
        "none of whose heartbeats was answered for this long stops by itself",
    )
    heartbeat_interval_seconds: float = Field(
        10.0, gt=0, description="how often jobs heartbeat (must be below `lease_seconds`)"
    )
    launch_grace_seconds: float = Field(
        60.0,
        ge=0,
        description="added to a new attempt's first lease: spark-submit, the driver JVM and "
        "the job's Python must start before its first heartbeat",
    )
    cancel_scan_interval_seconds: float = Field(
        30.0,
        ge=0,
        description="how often the scheduler looks for writers' cancel requests "
        "(`.hoodie/.cancel`, one LIST per table) of plans whose operations wait to run "
        "(0 = never; running jobs see them at their heartbeats)",
    )
    workers: int = Field(
        0,
        ge=0,
        le=64,
        description="resident Spark workers `tms serve` starts next to itself (0 = none; "
        "`tms worker` runs them anywhere)",
    )
    worker_slots: int = Field(
        2, ge=1, le=256, description="attempts each started worker runs at once"
    )
    worker_restart_after_attempts: int = Field(
        200,
        ge=0,
        description="a started worker restarts its SparkSession after this many "
        "attempts (0 = never; `tms worker --restart-after`)",
    )
    worker_max_memory_mb: int = Field(
        0,
        ge=0,
        description="a started worker restarts its SparkSession once its driver "
        "(Python and JVM) uses more memory (0 = no limit; `tms worker --max-memory-mb`)",
    )
    worker_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="a resident worker that has not called in for this long no longer takes "
        "the operations that leave the engine to choose",
    )
    worker_poll_seconds: float = Field(
        20.0, gt=0, le=60, description="longest a worker's claim waits for due work (long poll)"
    )
    retry_base_seconds: float = Field(
        5.0,
        ge=0,
        description="first retry delay; the delay before retry n is "
        "min(max, base·factor^(n-1)) ± jitter",
    )
    retry_factor: float = Field(2.0, ge=1, description="delay multiplier per attempt")
    retry_max_seconds: float = Field(600.0, ge=0, description="longest retry delay")
    retry_jitter: float = Field(
        0.1, ge=0, lt=1, description="random spread of a delay, as a fraction (0.1 = ±10%)"
    )
    default_max_retries: int = Field(
        3, ge=0, description="retries per operation unless submitted otherwise"
    )
    executor: ExecutorChoice = Field(
        AUTO,
        description="who runs table services' plans unless the submit or the table's policy "
        "says (`executor`): `native` (tms's own Spark tasks), `hudi` (Apache Hudi's "
        "table-service code in the same Spark job) or `auto` (native where it supports the "
        "table, else hudi)",
    )
    compaction_delta_commits: int = Field(
        5, ge=0, description="delta commits that trigger a compaction (0 = off)"
    )
    log_compaction_delta_commits: int = Field(
        0,
        ge=0,
        description="delta commits after which a log compaction is due for tables that enable "
        "`logcompaction` (0 = off); its plan then takes the file slices with at least "
        "`log_blocks_threshold` log blocks (Hudi's `hoodie.log.compaction.blocks.threshold`, "
        "default 5)",
    )
    clean_commits: int = Field(10, ge=0, description="commits that trigger a clean (0 = off)")
    clustering_commits: int = Field(
        0, ge=0, description="commits that trigger a clustering of tables that enable it (0 = off)"
    )
    metadata_compaction_delta_commits: int = Field(
        10,
        ge=0,
        description="metadata table delta commits (one per data table commit) that trigger a "
        "`metadata-compaction` of tables that enable it (0 = off; Hudi's "
        "`hoodie.metadata.compact.max.delta.commits`)",
    )
    notification_timeout_seconds: float = Field(
        3600.0,
        ge=0,
        description="a table without a commit notification for this long is pulled: the "
        "service reads its timeline and records the commits it did not hear about (0 = "
        "never; per table: policy `notification_timeout_seconds`); a table never notified is "
        "pulled from its registration on",
    )
    pull_sweep_interval_seconds: float = Field(
        21600.0,
        ge=0,
        description="every table's timeline is read at least this often, oldest first, as "
        "`pull_listings_per_minute` allows (0 = only tables past their notification timeout)",
    )
    pull_listings_per_minute: int = Field(
        60,
        ge=0,
        description="timeline listings one instance's pulls make per minute, spread evenly "
        "(0 = no pulls)",
    )
    measure_interval_seconds: float = Field(
        900.0,
        ge=0,
        description="each table's layout, write rate and table services' cost are measured "
        "at least this far apart, oldest first, as `measure_tables_per_minute` allows (0 = "
        "never)",
    )
    measure_tables_per_minute: int = Field(
        20,
        ge=0,
        description="tables one instance measures per minute, spread evenly; each "
        "measurement lists the table's partitions (0 = no measurements)",
    )
    measure_timeout_seconds: float = Field(
        120.0,
        gt=0,
        description="longest one table's measurement may read its storage (its timeline "
        "and every partition's listing); a table past it is recorded as failed",
    )
    measure_retention_days: float = Field(
        7.0,
        gt=0,
        le=3650,
        description="measurements are kept this long per table (and at most the newest "
        "2000 of a table)",
    )
    owner_limits: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="running operations per table owner over all instances, e.g. "
        "`team-a:4,team-b:2`; unlisted owners are unlimited, 0 holds an owner's operations",
    )
    table_runs_per_hour: int = Field(
        0,
        ge=0,
        description="attempts one table may start per hour, so a hot table cannot starve the "
        "queue (0 = unlimited; per table: policy `max_runs_per_hour`)",
    )
    small_file_bytes: int = Field(
        100 * 1024 * 1024,
        ge=1,
        description="a base file written smaller than this counts towards the small-files "
        "clustering trigger (Hudi's `hoodie.clustering.plan.strategy.small.file.limit`)",
    )
    alert_webhook_url: str | None = Field(
        None, description="alerts are POSTed here as JSON (unset = alerts are only recorded)"
    )
    alert_silent_timeouts: int = Field(
        3,
        ge=1,
        description="a table with no notification and no pulled commit for this many "
        "notification timeouts raises an alert",
    )
    alert_max_deliveries: int = Field(
        8,
        ge=1,
        description="tries to deliver one alert, with the `retry_*` backoff between them",
    )
    log_dir: Path | None = Field(
        None, description="job logs, one file per attempt; unset = `data_dir/logs`"
    )
    allowed_schemes: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["file", "s3", "s3a", "gs", "abfs", "hdfs"],
        description="storage schemes a table's base path may use (`file` = local paths)",
    )
    allowed_path_prefixes: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["/"],
        description="a base path must lie strictly below one of the prefixes of its scheme "
        "(whole path components); a scheme without any prefix here is not restricted; `/` = "
        "any local path but `/`",
    )
    storage_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="longest a request waits for storage (register, timeline, commit callback)",
    )
    storage_retries: int = Field(
        4,
        ge=0,
        description="retries of one object-store call that is safe to repeat (reads, "
        "listings, whole-object writes, deletes) after a 5xx, throttling, reset, timeout or "
        "cut-short answer; jobs and Spark tasks read the same variable",
    )
    storage_retry_base_seconds: float = Field(
        0.2,
        ge=0,
        description="object-store retry backoff: retry n waits a random time up to "
        "base·2^(n-1) (full jitter), at most `storage_retry_max_seconds`",
    )
    storage_retry_max_seconds: float = Field(
        5.0, ge=0, description="longest wait before one object-store retry"
    )
    storage_connect_timeout_seconds: float = Field(
        5.0, gt=0, description="longest an object-store connection takes to open (then retried)"
    )
    storage_read_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="longest an object-store answer may stall (then the call is retried)",
    )
    storage_threads: int = Field(
        8,
        ge=1,
        description="storage calls requests make at once, apart from the threads that serve "
        "probes and callbacks (more are refused with 503); the pull round and the cancel scan "
        "have as many each",
    )
    # --- Hudi's timeline server protocol (RFC-50 file-system view, RFC-56 markers)
    timeline_server_enabled: bool = Field(
        True,
        description="serve Hudi's remote file-system view (`/v1/hoodie/view/...`) and "
        "timeline-server markers (`/v1/hoodie/marker/...`) for registered tables",
    )
    view_cache_tables: int = Field(
        64, ge=1, description="tables whose timeline and file-system view stay cached (LRU)"
    )
    view_sync_interval_seconds: float = Field(
        1.0,
        ge=0,
        le=60,
        description="least time between two syncs of a table's view from storage that "
        "clients ask for (`lastinstantts`, `timelinehash`, `refresh`); 0 = whenever asked",
    )
    marker_batch_interval_ms: int = Field(
        50,
        ge=0,
        description="how long marker requests gather before one write stores them "
        "(Hudi's `hoodie.markers.timeline_server_based.batch.interval_ms`)",
    )
    marker_batch_files: int = Field(
        20,
        ge=1,
        le=1000,
        description="`MARKERS<n>` files per instant, written at once by different batches "
        "(Hudi's `hoodie.markers.timeline_server_based.batch.num_threads`)",
    )
    marker_heartbeat_tolerance_seconds: float = Field(
        120.0,
        gt=0,
        description="a writer whose heartbeat is older is dead to early conflict detection "
        "(Hudi's heartbeat interval times its tolerable misses)",
    )
    marker_name_max_chars: int = Field(
        1024,
        ge=64,
        description="longest marker name (`<partition>/<file>.marker.<type>`) accepted",
    )
    markers_per_instant_max: int = Field(
        500_000,
        ge=1,
        description="markers one instant may hold (one per data file its write creates)",
    )
    marker_instants_per_table_max: int = Field(
        256,
        ge=1,
        description="instants of one table whose markers this instance holds at once",
    )
    timeline_server_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="a port of their own for the open timeline-server routes, on `TMS_HOST`: "
        "they answer only there, and the rest of the API only on `TMS_PORT`; unset = both on "
        "`TMS_PORT`",
    )
    timeline_server_allowed_networks: Annotated[tuple[str, ...], NoDecode] = Field(
        ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
        description="client networks (CIDRs, comma-separated) the open timeline-server routes "
        "(`/v1/hoodie/...`) answer; others get 403 before any work. Default: loopback and "
        "private ranges; `0.0.0.0/0,::/0` for any",
    )
    # --- Spark settings writers may pass (extra_params spark.* keys), see config.spark_conf
    spark_conf_allowed: Annotated[tuple[str, ...] | None, NoDecode] = Field(
        None,
        description="Spark settings (`extra_params` `spark.*` keys) accepted from requests: "
        "exact keys or `prefix*` patterns, comma-separated; unset = the built-in tuning list, "
        "empty = none",
    )
    spark_conf_allowed_extra: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Spark settings accepted in addition to `spark_conf_allowed` (read at start)",
    )

    @field_validator("timeline_server_allowed_networks", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        entries = _split(value)
        if not isinstance(entries, list):
            return entries
        networks = []
        for entry in entries:
            try:
                networks.append(str(ipaddress.ip_network(str(entry).strip(), strict=False)))
            except ValueError:
                raise ValueError(f"{entry!r} is not a network such as 10.0.0.0/8") from None
        return tuple(networks)

    @field_validator("spark_conf_allowed", "spark_conf_allowed_extra", mode="before")
    @classmethod
    def _spark_conf_entries(cls, value: Any) -> Any:
        entries = _split(value)
        if not isinstance(entries, list):
            return entries
        for entry in entries:
            if not isinstance(entry, str) or not _SPARK_CONF_ENTRY.match(entry.strip()):
                raise ValueError(
                    f"{entry!r} is not a Spark setting or a prefix* pattern such as "
                    "spark.sql.adaptive.* (spark.* alone would allow everything)"
                )
        return tuple(entry.strip() for entry in entries)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return current_sources(settings_cls, init_settings, env_settings)

    @field_validator("database_url", mode="before")
    @classmethod
    def _database_url(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip()
        if not value:
            return None
        scheme, sep, rest = value.partition("://")
        if not sep:
            raise ValueError("expected a URL such as postgresql://user:pass@host:5432/tms")
        if scheme in {"postgres", "postgresql", "postgresql+psycopg"}:
            return f"postgresql+psycopg://{rest}"
        raise ValueError(f"scheme {scheme!r} is not supported; use postgresql:// (psycopg 3)")

    @field_validator("data_dir", "log_dir", "spark_home")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        """Resolve relative paths once, so jobs and logs agree whatever their cwd."""
        return None if value is None else value.expanduser().absolute()

    @field_validator("spark_home")
    @classmethod
    def _spark_home_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"{value} is not a directory")
        return value

    @field_validator("public_url", "alert_webhook_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("expected an http:// or https:// URL")
        return value

    @field_validator("executor", mode="before")
    @classmethod
    def _executor(cls, value: Any) -> ExecutorChoice:
        return parse_executor(value)

    @field_validator("task_memory")
    @classmethod
    def _task_memory(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if parse_size(value) < 1024 * 1024:
            raise ValueError("expected at least 1m (a size such as 512m or 1g)")
        return value.strip()

    @field_validator("spark_master")
    @classmethod
    def _spark_master(cls, value: str) -> str:
        if not _SPARK_MASTER.match(value.strip()):
            raise ValueError(
                "expected local, local[N], local[*], spark://…, yarn, k8s://… or mesos://…"
            )
        return value.strip()

    @field_validator("callback_keys", mode="before")
    @classmethod
    def _callback_keys(cls, value: Any) -> Any:
        """`key` or `key@prefix` entries; a key's prefixes are gathered into one entry."""
        items = _split(value)
        if not isinstance(items, list):
            return items
        scopes: dict[str, list[str]] = {}
        for item in items:
            if isinstance(item, CallbackKey):
                key, prefixes = item.key.get_secret_value(), list(item.prefixes)
            elif isinstance(item, str):
                key, prefixes = _callback_key_entry(item)
            else:
                raise ValueError("keys must be strings such as key or key@/lake/sales")
            if key not in scopes:
                scopes[key] = prefixes
            elif bool(scopes[key]) != bool(prefixes):
                raise ValueError(
                    "a key is given both for any base path and for prefixes; scope it with "
                    "key@prefix entries only, or give it once without a prefix"
                )
            else:
                scopes[key].extend(prefixes)
        return tuple(CallbackKey(SecretStr(k), tuple(p)) for k, p in scopes.items())

    @field_validator("auth_tokens", mode="before")
    @classmethod
    def _auth_tokens(cls, value: Any) -> Any:
        items = _split(value)
        if not isinstance(items, list):
            return items
        tokens: dict[str, Role] = {}
        parsed: list[AuthToken] = []
        for item in items:
            if isinstance(item, AuthToken):
                parsed.append(item)
                continue
            role_name, sep, token = str(item).strip().partition(":")
            if not sep or not token:
                raise ValueError(f"expected role:token, got {role_name!r}:…")
            try:
                role = Role(role_name.strip().lower())
            except ValueError:
                msg = f"unknown role {role_name!r}; use admin, writer or viewer"
                raise ValueError(msg) from None
            if token.lower() in _PLACEHOLDER_SECRETS or any(c.isspace() for c in token):
                raise ValueError(f"the {role} token is a placeholder or contains whitespace")
            if tokens.setdefault(token, role) != role:
                raise ValueError("one token is given two different roles")
            parsed.append(AuthToken(role, SecretStr(token)))
        return tuple(parsed)

    @field_validator("allowed_schemes", mode="before")
    @classmethod
    def _allowed_schemes(cls, value: Any) -> Any:
        items = _split(value)
        if not isinstance(items, list):
            return items
        schemes = [str(item).strip().lower() for item in items]
        for scheme in schemes:
            if not _URL_SCHEME.match(scheme):
                raise ValueError(f"{scheme!r} is not a URL scheme (e.g. file, s3, hdfs)")
        return schemes

    @field_validator("allowed_path_prefixes", mode="before")
    @classmethod
    def _allowed_path_prefixes(cls, value: Any) -> Any:
        items = _split(value)
        if not isinstance(items, list):
            return items
        prefixes: list[str] = []
        for item in items:
            try:
                prefixes.append(normalize_base_path(str(item)))
            except BasePathError as exc:
                raise ValueError(f"{str(item).strip()!r} {exc}") from None
        return prefixes

    @field_validator("queue_limits", "owner_limits", mode="before")
    @classmethod
    def _queue_limits(cls, value: Any) -> Any:
        items = _split(value)
        if not isinstance(items, list):
            return items
        limits: dict[str, int] = {}
        for item in items:
            queue, sep, limit = str(item).partition(":")
            queue = queue.strip()
            if not sep or not queue or not limit.strip().isdigit():
                raise ValueError(f"expected name:limit pairs with limits ≥ 0 (bad: {item!r})")
            limits[queue] = int(limit)
        return limits

    @field_validator("queue_limits", "owner_limits")
    @classmethod
    def _queue_limit_values(cls, value: dict[str, int]) -> dict[str, int]:
        for queue, limit in value.items():
            if not queue.strip() or limit < 0:
                raise ValueError(f"{queue!r}: the limit must be ≥ 0, got {limit}")
        return value

    @model_validator(mode="after")
    def _derived(self) -> Settings:
        if self.heartbeat_interval_seconds >= self.lease_seconds:
            raise ValueError(
                f"TMS_HEARTBEAT_INTERVAL_SECONDS ({self.heartbeat_interval_seconds}) must be "
                f"smaller than TMS_LEASE_SECONDS ({self.lease_seconds})"
            )
        if self.retry_max_seconds < self.retry_base_seconds:
            raise ValueError(
                f"TMS_RETRY_MAX_SECONDS ({self.retry_max_seconds}) must be at least "
                f"TMS_RETRY_BASE_SECONDS ({self.retry_base_seconds})"
            )
        # Frozen model: fill derived defaults through object.__setattr__ once, at load.
        if self.public_url is None:
            host = "127.0.0.1" if self.host in {"0.0.0.0", "::", ""} else self.host
            host = f"[{host}]" if ":" in host else host
            object.__setattr__(self, "public_url", f"http://{host}:{self.port}")
        if self.log_dir is None:
            object.__setattr__(self, "log_dir", self.data_dir / "logs")
        return self

    @property
    def api_url(self) -> str:
        """`public_url`, always set once loaded (typed as `str` for callers)."""
        assert self.public_url is not None
        return self.public_url

    @property
    def job_log_dir(self) -> Path:
        """`log_dir`, always set once loaded (typed as `Path` for callers)."""
        assert self.log_dir is not None
        return self.log_dir

    def storage_retry_environment(self) -> dict[str, str]:
        """The object-store retry settings as the variables `tms.hudi.storage` reads, for
        the service's process and the jobs and workers it starts (a value from
        `conf/tms.toml` reaches them this way)."""
        return {
            f"{ENV_PREFIX}{name.upper()}": str(getattr(self, name))
            for name in STORAGE_RETRY_SETTINGS
        }

    @property
    def auth_enabled(self) -> bool:
        return bool(self.auth_tokens)

    @property
    def accepted_callback_keys(self) -> tuple[CallbackKey, ...]:
        """The configured keys; without any, Hudi's public default key while auth is off
        (a writer works unconfigured in development) and no key at all with auth on."""
        if self.callback_keys or self.auth_enabled:
            return self.callback_keys
        return (CallbackKey(SecretStr(DEFAULT_CALLBACK_KEY)),)

    def role_for_token(self, token: str) -> Role | None:
        """The role a bearer token grants, compared in constant time; None if unknown."""
        found: Role | None = None
        for entry in self.auth_tokens:
            if hmac.compare_digest(entry.token.get_secret_value().encode(), token.encode()):
                found = entry.role
        return found


def _callback_key_entry(item: str) -> tuple[str, list[str]]:
    """`key` (any base path) or `key@prefix`; keys cannot hold `@`, prefixes may (abfs://)."""
    key, sep, prefix = item.strip().partition("@")
    key, prefix = key.strip(), prefix.strip()
    if not key or any(c.isspace() for c in key):
        raise ValueError("a key is empty or contains whitespace")
    if not sep:
        return key, []
    if not (prefix.startswith("/") or _URL_PREFIX.match(prefix)):
        raise ValueError(f"the prefix {prefix!r} is not an absolute path or a URL (key@/lake/a)")
    return key, [prefix]


def _split(value: Any) -> Any:
    """Env/TOML strings are comma-separated lists; TOML may also give arrays or tables."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, Mapping):
        return [f"{k}:{v}" for k, v in value.items()]
    if isinstance(value, list | tuple):
        return list(value)
    return value
