"""Table resources: registration, operator changes, listing, timeline."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError, ValidationError

from tms.api.schemas.common import (
    BasePath,
    Count,
    Engine,
    Executor,
    Identifier,
    Label,
    Priority,
    Strict,
    Text,
    check_text,
    parse_action,
)
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import PROVIDER_ALIASES, LockSpec
from tms.planning import MAX_TTL_DAYS, BadJobInput, lock_settings
from tms.policies import TRIGGER_KEYS, SpecError, parse_triggers
from tms.store import ServiceAction, TableType

__all__ = [
    "PolicyIn",
    "RegisterIn",
    "StorageOptions",
    "TableFields",
    "TableIn",
    "TableOut",
    "TablePage",
    "TablePatch",
    "Thresholds",
    "TimelineInstant",
    "TimelineOut",
]


class PolicyIn(Strict):
    """Per-table overrides of the trigger thresholds (commit counts, 0 = never), and the
    planning parameters that operations made by those triggers carry to their jobs."""

    compaction_delta_commits: Count | None = None
    log_compaction_delta_commits: Count | None = None
    clean_commits: Count | None = None
    clustering_commits: Count | None = None
    metadata_compaction_delta_commits: Count | None = None
    archival_commits: Count | None = None
    """Writes after which an archival is due, for a table that enables `archival` (default:
    keep.max - keep.min + 1 of its archival keep settings, else Hudi's 11)."""
    compaction_strategy: Literal["all", "log-size"] | None = None
    clean_policy: Literal["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"] | None = None
    clean_retained: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    clustering_sort_columns: list[Annotated[Text, Field(min_length=1, max_length=200)]] | None = (
        None
    )
    clustering_target_file_size: Annotated[StrictInt, Field(ge=1024, le=1 << 40)] | None = None
    log_compaction_blocks_threshold: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    small_file_limit: Annotated[StrictInt, Field(ge=1, le=1 << 40)] | None = None
    """Base files smaller than this count as small in the table's measurements (Hudi's
    hoodie.parquet.small.file.limit; unset: the table's own, else 104857600)."""
    archival_keep_min: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    """hoodie.keep.min.commits of the table's archival operations (and its dry run)."""
    archival_keep_max: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    """hoodie.keep.max.commits of the table's archival operations (and its dry run)."""
    ttl_days: Annotated[StrictInt, Field(ge=1, le=MAX_TTL_DAYS)] | None = None
    """The table's partition TTL: the policy deletes the partitions whose last commit is older
    than this many days, for a table that enables `partition_ttl` (unset: never)."""
    ttl_partitions: (
        Annotated[list[Annotated[Text, Field(min_length=1, max_length=200)]], Field(max_length=100)]
        | None
    ) = None
    """Glob patterns over partition paths the table's partition TTL considers (unset: all)."""
    ttl_max_partitions: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    """The most partitions one of the table's partition TTLs deletes (default 1000)."""
    ttl_interval_hours: Annotated[StrictFloat, Field(ge=0, le=100_000)] | None = None
    """Hours between the partition TTLs the policy creates (default 24; 0 = never)."""
    compaction_cancellable: bool | None = None
    clustering_cancellable: bool | None = None
    clean_cancel_plans_after_hours: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    clean_cancel_plans_after_instants: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    clean_rollback_failed_writes: bool | None = None
    lock_provider: (
        Annotated[
            Text,
            Field(
                min_length=1,
                max_length=200,
                json_schema_extra={"enum": sorted(PROVIDER_ALIASES)},
                description="the providers tms takes part in (a provider's class name is "
                "also taken with any package)",
            ),
        ]
        | None
    ) = None
    lock_path: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    lock_expire_minutes: Annotated[StrictInt, Field(ge=0, le=100_000)] | None = None
    execution_engine: Engine | None = None
    """The engine of the table's operations that leave it to choose (`spark`)."""
    executor: Executor | None = None
    """Who runs the plans of the table's operations that do not name an executor (and of
    those its triggers make); unset: the instance's `TMS_EXECUTOR`."""
    notification_timeout_seconds: Annotated[StrictFloat, Field(ge=0, le=10_000_000)] | None = None
    """After this long without a notification the service pulls the table (0 = never)."""
    max_runs_per_hour: Annotated[StrictInt, Field(ge=0, le=100_000)] | None = None
    """Attempts the table may start per hour (0 = unlimited)."""
    triggers: dict[str, Any] | None = Field(
        None,
        description="per action (compaction, logcompaction, clustering, clean, "
        "metadata-compaction, archival, partition_ttl), what "
        'makes it due: a strategy with its threshold, e.g. {"delta_commits": 5}, or '
        '{"any": [...]} / {"all": [...]} of them; an action without one keeps its commit '
        "count threshold (partition_ttl: its ttl_interval_hours)",
    )

    @model_validator(mode="after")
    def _archival_keep(self) -> PolicyIn:
        """Hudi refuses keep.max not above keep.min: so is the pair here (422)."""
        low, high = self.archival_keep_min, self.archival_keep_max
        if low is not None and high is not None and high <= low:
            raise ValueError("archival_keep_max must be greater than archival_keep_min")
        return self

    @model_validator(mode="after")
    def _ttl_needs_days(self) -> PolicyIn:
        """The partition TTL's other settings say nothing without its days: refused (422)."""
        if self.ttl_days is not None:
            return self
        given = [
            name
            for name in ("ttl_partitions", "ttl_max_partitions", "ttl_interval_hours")
            if getattr(self, name) is not None
        ]
        if self.triggers is not None and ServiceAction.PARTITION_TTL.value in self.triggers:
            given.append("triggers.partition_ttl")
        if given:
            raise ValueError(f"{', '.join(given)} need ttl_days (the partition TTL's days)")
        return self

    @field_validator("lock_provider")
    @classmethod
    def _lock_provider(cls, value: str | None) -> str | None:
        """A provider tms cannot take part in is refused here, naming it (422)."""
        if value is not None:
            try:
                LockSpec.of(value)
            except UnsupportedTableError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("lock_path")
    @classmethod
    def _lock_path(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                lock_settings({"hoodie.write.lock.filesystem.path": value})
            except BadJobInput as exc:
                raise ValueError(str(exc).split(": ", 1)[-1]) from None
        return value

    @field_validator("triggers")
    @classmethod
    def _triggers(cls, value: dict[str, Any] | None, info: ValidationInfo) -> Any:
        """A spec the policies cannot run is a 422 naming the value at fault
        (`body.policy.triggers.compaction.any.1.elapsed_hours`)."""

        def error(path: tuple[str | int, ...], problem: str, given: Any) -> ValidationError:
            # Located below `triggers` (pydantic prefixes the field's own location).
            kind = PydanticCustomError("trigger_spec", "{problem}", {"problem": problem})
            return ValidationError.from_exception_data(
                "triggers", [{"type": kind, "loc": path, "input": given}]
            )

        if value is None:
            return value
        try:
            conditions = parse_triggers(value)
        except SpecError as exc:
            raise error(exc.path, exc.problem, exc.value) from None
        for action in conditions:
            key = TRIGGER_KEYS[action]
            if info.data.get(key) is not None:
                problem = f"set either {key} or triggers.{action.value}, not both"
                raise error((action.value,), problem, value[action.value])
        return value


def _actions(value: Any) -> Any:
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [parse_action(v) if isinstance(v, str) else v for v in value]
    return value


MAX_STORAGE_OPTIONS = 32
MAX_OPTION_VALUE_CHARS = 4096
_OPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def parse_storage_options(value: Any) -> dict[str, str | int | float | bool]:
    """A JSON object of option names to strings, numbers or booleans, size-limited.

    Messages name the option, never its value: values are secrets. (Which names a table may
    carry depends on its base path's scheme: the routes check that.)"""
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object of option names to values")
    if len(value) > MAX_STORAGE_OPTIONS:
        raise ValueError(f"at most {MAX_STORAGE_OPTIONS} options")
    options: dict[str, str | int | float | bool] = {}
    for name, option in value.items():
        if not isinstance(name, str) or not _OPTION_NAME.match(name):
            raise ValueError("option names are identifiers of at most 64 characters")
        if isinstance(option, str):
            if len(option) > MAX_OPTION_VALUE_CHARS:
                raise ValueError(f"{name}: at most {MAX_OPTION_VALUE_CHARS} characters")
            try:
                check_text(option)
            except ValueError:
                raise ValueError(f"{name}: not valid text (NUL or a lone surrogate)") from None
        elif not isinstance(option, int | float | bool) or option != option:  # NaN
            raise ValueError(f"{name}: values must be strings, numbers or booleans")
        options[name] = option
    return options


StorageOptions = Annotated[
    dict[str, str | int | float | bool],
    BeforeValidator(parse_storage_options),
    Field(
        description="options of the table's filesystem (credentials, endpoint); write-only: "
        "responses name them (`storage_options`), never show their values",
        max_length=MAX_STORAGE_OPTIONS,
    ),
]


class TableFields(Strict):
    """What registering a table says about it (both ways of registering)."""

    db_name: Identifier
    table_name: Identifier
    base_path: BasePath
    owner: Label | None = None
    queue: Label | None = None
    priority: Priority | None = None
    table_type: TableType | None = Field(
        None, description="read from hoodie.properties when the table is on storage"
    )
    enabled_actions: list[ServiceAction] | None = Field(
        None, description="actions the policies may create; default compaction, clean"
    )
    policy: PolicyIn | None = None
    paused: bool | None = None

    _enabled = field_validator("enabled_actions", mode="before")(_actions)


class TableIn(TableFields):
    """Register a table (idempotent for the same name and base path); `storage_options`
    need the admin role."""

    storage_options: StorageOptions | None = None


class RegisterIn(TableFields):
    """RFC-43 register: the same fields but storage options (writers register there);
    unknown fields are ignored for client compatibility."""

    model_config = ConfigDict(extra="ignore")


def _not_nullable(schema: dict[str, Any]) -> None:
    """Document optional fields as absent-or-a-value: `X | None` without the `null`."""
    for field in schema.get("properties", {}).values():
        options = field.get("anyOf")
        if options is None:
            continue
        kept = [option for option in options if option.get("type") != "null"]
        field.pop("default", None)
        if len(kept) == 1:
            del field["anyOf"]
            field.update(kept[0])
        else:
            field["anyOf"] = kept


class TablePatch(Strict):
    """Operator changes; absent fields stay as they are (`null` is refused: leave the field
    out instead, so the schema does not declare them nullable). `policy` replaces all
    overrides."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_not_nullable)

    paused: bool | None = None
    owner: Label | None = None
    queue: Label | None = None
    priority: Priority | None = None
    enabled_actions: list[ServiceAction] | None = None
    policy: PolicyIn | None = None
    storage_options: StorageOptions | None = Field(
        None, description="replaces all the table's storage options; `{}` removes them"
    )

    _enabled = field_validator("enabled_actions", mode="before")(_actions)


class Thresholds(BaseModel):
    """The thresholds in effect for a table: its overrides over the service defaults."""

    compaction_delta_commits: int
    clean_commits: int
    clustering_commits: int
    metadata_compaction_delta_commits: int
    log_compaction_delta_commits: int
    archival_commits: int
    ttl_interval_hours: float = Field(
        description="hours between the partition TTLs the policy creates, for a table that "
        "sets ttl_days and enables partition_ttl"
    )


class TableOut(BaseModel):
    id: int
    db_name: str
    table_name: str
    base_path: str
    owner: str | None
    queue: str
    priority: int
    enabled_actions: list[ServiceAction]
    policy: dict[str, Any]
    thresholds: Thresholds
    table_type: TableType | None
    table_version: int | None
    last_commit_instant: str | None
    delta_commits_since_compaction: int
    commits_since_clean: int
    commits_since_clustering: int
    commits_since_metadata_compaction: int
    delta_commits_since_log_compaction: int = Field(
        description="delta commits since the last log compaction or compaction"
    )
    commits_since_archival: int = Field(
        description="writes since the policy last created an archival"
    )
    log_bytes_since_compaction: int
    log_files_since_compaction: int
    small_files_since_clustering: dict[str, int] = Field(
        description="small base files written since the last clustering, per partition path"
    )
    last_compaction_at: datetime | None
    last_clustering_at: datetime | None
    last_clean_at: datetime | None
    last_partition_ttl_at: datetime | None = Field(
        description="when the policy last created a partition TTL (its interval's clock)"
    )
    last_notification_at: datetime | None
    last_commit_seen_at: datetime | None = Field(
        description="when a commit new to the service was last recorded, notified or pulled"
    )
    last_pulled_at: datetime | None = Field(
        description="when the service last read the table's timeline itself (pull fallback)"
    )
    paused: bool
    storage_options: list[str] = Field(
        description="names of the storage options set on the table (values are write-only)"
    )
    created_at: datetime
    updated_at: datetime
    created: bool | None = Field(
        None, description="on register: true when this call created the table"
    )


class TablePage(BaseModel):
    items: list[TableOut]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page")


class TimelineInstant(BaseModel):
    instant: str
    action: str
    state: str
    completion_time: str | None
    requested_as: str


class TimelineOut(BaseModel):
    table_id: int
    base_path: str
    table_type: str
    table_version: int
    instants: list[TimelineInstant]
