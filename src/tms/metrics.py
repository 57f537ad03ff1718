"""Prometheus metrics of the service: one registry, every metric object defined here.

Label values are bounded sets (actions, statuses, outcomes, route templates, registered
tables' names), never ids or instant times.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_JOB_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)

HTTP_REQUESTS = Counter(
    "tms_http_requests_total",
    "HTTP requests served, by method, route template and status code.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "tms_http_request_duration_seconds",
    "HTTP request latency, by method and route template.",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
COMMIT_NOTIFICATIONS = Counter(
    "tms_commit_notifications_total",
    "Commit notifications received, by source (callback|client) and result (new|duplicate).",
    ["source", "result"],
    registry=REGISTRY,
)
COMMIT_BATCH_SIZE = Histogram(
    "tms_commit_batch_size",
    "Commit notifications stored per database transaction (group commit).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    registry=REGISTRY,
)
OPERATIONS_CREATED = Counter(
    "tms_operations_created_total",
    "Operations created, by action and origin (policy|submit|client).",
    ["action", "origin"],
    registry=REGISTRY,
)
OPERATION_TRANSITIONS = Counter(
    "tms_operation_transitions_total",
    "Operation status changes, by action and new status.",
    ["action", "status"],
    registry=REGISTRY,
)
OPERATIONS_BY_STATUS = Gauge(
    "tms_operations",
    "Operations by status and action, as last counted from the database.",
    ["status", "action"],
    registry=REGISTRY,
)
ATTEMPTS = Counter(
    "tms_attempts_total",
    "Finished attempts, by action, outcome (SUCCEEDED|FAILED|LOST|CANCELLED) and the executor "
    "that ran (native|hudi; none when its job reported none).",
    ["action", "outcome", "executor"],
    registry=REGISTRY,
)
OPERATION_DURATION = Histogram(
    "tms_operation_duration_seconds",
    "Time from an operation's creation to its terminal status, by action and status.",
    ["action", "status"],
    buckets=_JOB_BUCKETS,
    registry=REGISTRY,
)
ATTEMPT_DURATION = Histogram(
    "tms_attempt_duration_seconds",
    "Duration of an attempt from launch to its end, by action, outcome and executor.",
    ["action", "outcome", "executor"],
    buckets=_JOB_BUCKETS,
    registry=REGISTRY,
)
SCHEDULING_DELAY = Histogram(
    "tms_scheduling_delay_seconds",
    "Delay from an operation being due to its claim by an engine (the scheduler or a "
    "resident worker), by action.",
    ["action"],
    buckets=(*_LATENCY_BUCKETS, 10.0, 30.0, 60.0),
    registry=REGISTRY,
)
SCHEDULER_TICK = Histogram(
    "tms_scheduler_tick_duration_seconds",
    "Time one scheduler tick takes (reap, claim, launch).",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
RUNNING_OPERATIONS = Gauge(
    "tms_running_operations",
    "Operations this instance is running now.",
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "tms_queue_depth",
    "Operations due and waiting to be claimed, by queue.",
    ["queue"],
    registry=REGISTRY,
)
LAUNCH_OVERHEAD = Histogram(
    "tms_launch_overhead_seconds",
    "Time from an attempt's claim to its job's first heartbeat, by engine (spark-submit: "
    "process, JVM and SparkContext start; spark-worker: the claim reaching a warm worker).",
    ["engine"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 15.0, 30.0, 60.0),
    registry=REGISTRY,
)
WORKERS = Gauge(
    "tms_workers",
    "Resident Spark workers that called in within TMS_WORKER_TIMEOUT_SECONDS.",
    registry=REGISTRY,
)
WORKER_SLOTS = Gauge(
    "tms_worker_slots",
    "Slots of the live resident workers, by state (busy|idle).",
    ["state"],
    registry=REGISTRY,
)
PULLS = Counter(
    "tms_pulls_total",
    "Tables whose timeline the service read itself, by reason (silent: past the "
    "notification timeout; sweep: the periodic sweep) and result (pulled|failed).",
    ["reason", "result"],
    registry=REGISTRY,
)
PULLED_COMMITS = Counter(
    "tms_pulled_commits_total",
    "Commits the pulls found on timelines that no notification had told of.",
    registry=REGISTRY,
)
PULL_CLAIM = Histogram(
    "tms_pull_claim_duration_seconds",
    "Time one pull claim takes in the database (picking and leasing the tables due).",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
MEASUREMENTS = Counter(
    "tms_measurements_total",
    "Turns of the measurement sweep on a table, by result (measured; skipped: paused; "
    "failed: its storage failed or took too long).",
    ["result"],
    registry=REGISTRY,
)
EMBEDDED_DB_RESTARTS = Counter(
    "tms_embedded_db_restarts",
    "Restarts of the embedded PostgreSQL after it died, by result (restarted|failed).",
    ["result"],
    registry=REGISTRY,
)
ALERTS = Counter(
    "tms_alerts_total",
    "Alerts by kind (operation_failed|table_silent) and outcome (raised; then per webhook "
    "try: delivered|retried|failed, failed meaning out of tries).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
STORAGE_REQUEST_KINDS = ("LIST", "HEAD", "GET", "PUT", "DELETE")
"""S3's billing classes, as `tms.hudi.storage.requests.RequestKind` names them."""
STORAGE_REQUESTS = Counter(
    "tms_storage_requests_total",
    "Storage requests (S3's billing classes) by table (db.table), action (a table service, "
    "or timeline for the API's reads) and kind (LIST|HEAD|GET|PUT|DELETE).",
    ["table", "action", "kind"],
    registry=REGISTRY,
)
MARKERS_CREATED = Counter(
    "tms_markers_created_total",
    "Timeline-server markers created for Hudi writers (a marker asked for twice counts once).",
    registry=REGISTRY,
)
MARKER_CONFLICTS = Counter(
    "tms_marker_conflicts_total",
    "Early write conflicts detected on marker creation (RFC-56): writers' instants aborted "
    "by a refused marker.",
    registry=REGISTRY,
)
FOREIGN_MARKERS = Counter(
    "tms_foreign_markers_total",
    "Markers of a table service's instant naming files the instant did not write, by table "
    "(db.table) and action: left alone, never deleted.",
    ["table", "action"],
    registry=REGISTRY,
)
MARKERS_REFUSED = Counter(
    "tms_markers_refused_total",
    "Timeline-server marker requests refused, by reason (instant_not_pending, "
    "planned_by_tms, limit, dir_delete_pending).",
    ["reason"],
    registry=REGISTRY,
)
VIEW_REQUESTS = Counter(
    "tms_view_requests_total",
    "Requests of Hudi's remote file-system view (/v1/hoodie/view), by endpoint (Hudi's name of "
    "the call) and cache (hit|miss|advanced|synced: current, built by listing, advanced for "
    "commits the store recorded, synced for a newer timeline the client named).",
    ["endpoint", "cache"],
    registry=REGISTRY,
)
VIEW_LISTINGS_SAVED = Counter(
    "tms_view_listings_saved_total",
    "Partition listings the file-system view's clients did not make: partitions answered "
    "from a cached view.",
    registry=REGISTRY,
)
VIEW_STORAGE_LISTINGS = Counter(
    "tms_view_storage_listings_total",
    "Storage listings the file-system view made (timelines and partitions).",
    registry=REGISTRY,
)
HUDI_BUNDLE_FETCHES = Counter(
    "tms_hudi_bundle_fetches_total",
    "Fetches of Hudi's Spark bundle this process made for the hudi executor, by outcome "
    "(fetched, failed).",
    ["outcome"],
    registry=REGISTRY,
)
HUDI_EXECUTOR_AVAILABLE = Gauge(
    "tms_hudi_executor_available",
    "1 when Hudi's Spark bundle is on this instance for the hudi executor, else 0.",
    registry=REGISTRY,
)

# Per-table measurements (`tms.scheduler.measure`), as last read from the database: one
# series per registered table measured (its `db.table` name), a table's go with it.
TABLE_MEASURED_AT = Gauge(
    "tms_table_measured_timestamp_seconds",
    "When the table's latest measurement with figures was taken (Unix time), by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_FILE_SLICES = Gauge(
    "tms_table_file_slices",
    "Latest file slices of the table (one per file group), by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_LOG_FILES_PER_SLICE = Gauge(
    "tms_table_log_files_per_slice",
    "Log files per latest file slice, by table and stat (p50|p95|max, nearest rank).",
    ["table", "stat"],
    registry=REGISTRY,
)
TABLE_LOG_BYTES_PER_SLICE = Gauge(
    "tms_table_log_bytes_per_slice",
    "Bytes of log files per latest file slice, by table and stat (p50|p95|max).",
    ["table", "stat"],
    registry=REGISTRY,
)
TABLE_BASE_FILE_BYTES = Gauge(
    "tms_table_base_file_bytes",
    "Sizes of the latest file slices' base files, by table and stat (p5|p50|p95|max).",
    ["table", "stat"],
    registry=REGISTRY,
)
TABLE_SMALL_FILES = Gauge(
    "tms_table_small_files",
    "Base files of the latest slices under the table's small-file limit (files a scan "
    "opens beyond need), by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_READ_LOG_FILES = Gauge(
    "tms_table_read_log_files",
    "Log files a snapshot read of the latest file slices merges, by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_READ_LOG_BYTES = Gauge(
    "tms_table_read_log_bytes",
    "Bytes of log files a snapshot read of the latest file slices merges, by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_COMMITS_PER_HOUR = Gauge(
    "tms_table_commits_per_hour",
    "Writers' commits per hour over the last 24 hours, by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_WRITE_BYTES_PER_HOUR = Gauge(
    "tms_table_write_bytes_per_hour",
    "Bytes the writers' commits wrote per hour over the last 24 hours, by table.",
    ["table"],
    registry=REGISTRY,
)
TABLE_SERVICE_EXECUTOR_SECONDS = Gauge(
    "tms_table_service_executor_seconds",
    "Executor-seconds of a table service's attempts over the last 24 hours (reported, else "
    "estimated), by table and action.",
    ["table", "action"],
    registry=REGISTRY,
)
TABLE_SERVICE_BYTES_WRITTEN = Gauge(
    "tms_table_service_bytes_written",
    "Bytes a table service's attempts wrote over the last 24 hours, by table and action.",
    ["table", "action"],
    registry=REGISTRY,
)
TABLE_MEASUREMENT_GAUGES = (
    TABLE_MEASURED_AT,
    TABLE_FILE_SLICES,
    TABLE_LOG_FILES_PER_SLICE,
    TABLE_LOG_BYTES_PER_SLICE,
    TABLE_BASE_FILE_BYTES,
    TABLE_SMALL_FILES,
    TABLE_READ_LOG_FILES,
    TABLE_READ_LOG_BYTES,
    TABLE_COMMITS_PER_HOUR,
    TABLE_WRITE_BYTES_PER_HOUR,
    TABLE_SERVICE_EXECUTOR_SECONDS,
    TABLE_SERVICE_BYTES_WRITTEN,
)
"""Cleared and set again from the database at each refresh."""
