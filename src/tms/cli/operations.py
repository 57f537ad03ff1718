"""The operator CLI's `tms ops …`: operations and their attempts, through the API.

Same conventions as `tms tables`: text by default, `--json`, one-line errors (exit 1 when the
API refuses, 2 when the service does not answer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer

from tms.api_client import Json
from tms.cli.remote import AsJson, ExecutorOption, Token, Url, connect, qualified, resolve_table
from tms.cli.render import echo_json, print_fields, print_rows, short_time
from tms.cli.service_names import ServiceName, service_names
from tms.hudi.actions import INDEXING

__all__ = ["ops_app"]

ops_app = typer.Typer(
    help="Operations and their attempts (talks to the service).", no_args_is_help=True
)

OperationId = Annotated[int, typer.Argument(help="Operation id.", min=1)]

_ERROR_WIDTH = 60


# Typer reads the annotations below at run time and gets the enum with its members; mypy,
# which cannot see members made at run time, checks them as `ServiceName`.
if TYPE_CHECKING:
    ActionName: TypeAlias = ServiceName
else:
    ActionName = service_names("ActionName", words=("index",))
    """Every table service, and RFC-43's word `index` for indexing (its `.action`)."""


def _first_line(text: Any, width: int = _ERROR_WIDTH) -> str | None:
    """An error's first line, cut to fit a table column."""
    lines = str(text or "").strip().splitlines()
    if not lines:
        return None
    return lines[0] if len(lines[0]) <= width else lines[0][: width - 1] + "…"


def _executor_cell(operation: Json) -> str | None:
    """Who ran the operation's plans, with what was asked when that differs: `hudi (auto)`;
    what was asked alone until a job reported."""
    asked, ran = operation.get("executor"), operation.get("executed_by")
    if ran is None:
        return asked
    return ran if ran == asked or asked is None else f"{ran} ({asked})"


def _operation_rows(operations: list[Json]) -> list[dict[str, Any]]:
    return [
        {
            "id": o["id"],
            "table": qualified(o),
            "action": o["action"],
            "instant": o.get("instant"),
            "status": o["status"] + (" (cancel requested)" if o.get("cancel_requested") else ""),
            "executor": _executor_cell(o),
            "runs": f"{o['run_times']}/{o['max_retries'] + 1}",
            "updated": short_time(o.get("updated_at")),
            "error": _first_line(o.get("last_error")),
        }
        for o in operations
    ]


@ops_app.command("ls")
def ops_ls(
    table: Annotated[str | None, typer.Option(help="Only this table (id or db.table).")] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(help="Only these statuses (repeat, or comma-separated): SCHEDULED, …"),
    ] = None,
    action: Annotated[ActionName | None, typer.Option(help="Only this action.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).", min=1)] = 50,
    include_removed: Annotated[
        bool, typer.Option("--all", help="Include operations removed by their writers.")
    ] = False,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """List operations, newest first. EXECUTOR is who ran the plans, with what was asked
    in brackets when that differs (`hudi (auto)`); RUNS is launches so far / launches
    allowed."""
    with connect(url, token) as client:
        table_id = resolve_table(client, table)["id"] if table else None
        operations = client.operations(
            table_id=table_id,
            statuses=status or (),
            action=action.action if action else None,
            include_deleted=include_removed,
            limit=limit,
        )
    if as_json:
        echo_json(operations)
        return
    if not operations:
        typer.echo("no operations")
        return
    columns = ["id", "table", "action", "instant", "status", "executor", "runs", "updated", "error"]
    print_rows(_operation_rows(operations), columns)


def _progress(progress: Json | None) -> str | None:
    """An attempt's last reported stage, with its file groups done out of planned."""
    if not isinstance(progress, dict) or not progress.get("stage"):
        return None
    planned = progress.get("file_groups_planned")
    if planned is None:
        return str(progress["stage"])
    return f"{progress['stage']} {progress.get('file_groups_done') or 0}/{planned}"


def _attempt_rows(attempts: list[Json]) -> list[dict[str, Any]]:
    return [
        {
            "number": a["number"],
            "outcome": a["outcome"],
            "started": short_time(a["started_at"]),
            "duration": (
                f"{a['duration_seconds']:.1f}s" if a.get("duration_seconds") is not None else None
            ),
            "exit": a.get("exit_code"),
            "progress": _progress(a.get("progress")),
            "instance": a["instance_id"],
            "spark_app": a.get("spark_app_id"),
            "log": a.get("log_path"),
            "error": _first_line(a.get("error")),
        }
        for a in attempts
    ]


@ops_app.command("show")
def ops_show(
    operation_id: OperationId, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """One operation with its history of status changes and its attempts."""
    with connect(url, token) as client:
        operation = client.operation(operation_id)
        attempts = client.attempts(operation_id)
    if as_json:
        echo_json({"operation": operation, "attempts": attempts})
        return
    o = operation
    print_fields(
        [
            ("operation", o["id"]),
            ("table", f"{qualified(o)} (table {o['table_id']})"),
            ("action", o["action"]),
            ("instant", o.get("instant") or "planned by its job"),
            ("status", o["status"]),
            ("cancel requested", "yes" if o.get("cancel_requested") else "no"),
            ("queue / priority", f"{o['queue']} / {o['priority']}"),
            ("engine", o["engine"]),
            ("executor", _executor_cell(o)),
            ("native declined", o.get("native_declined")),
            ("resource", o.get("resource")),
            ("parallelism", o.get("parallelism")),
            ("extra params", ", ".join(f"{k}={v}" for k, v in o["extra_params"].items()) or None),
            ("runs", f"{o['run_times']} of {o['max_retries'] + 1} allowed"),
            ("next run at", short_time(o.get("next_run_at"))),
            ("created", short_time(o.get("created_at"))),
            ("finished", short_time(o.get("finished_at"))),
            (
                "lease",
                f"{o['lease_owner']} until {short_time(o['lease_expires_at'])}"
                if o.get("lease_owner")
                else None,
            ),
            ("last error", _first_line(o.get("last_error"), 200)),
            ("result", ", ".join(f"{k}={v}" for k, v in (o.get("result") or {}).items()) or None),
        ]
    )
    events = o.get("events") or []
    if events:
        typer.echo("\nHistory")
        print_rows(
            [
                {
                    "at": short_time(e["at"]),
                    "from": e.get("from_status"),
                    "to": e["to_status"],
                    "attempt": e.get("attempt_id"),
                    "reason": e.get("reason"),
                }
                for e in events
            ],
            ["at", "from", "to", "attempt", "reason"],
        )
    typer.echo("\nAttempts")
    if attempts:
        print_rows(
            _attempt_rows(attempts),
            [
                "number",
                "outcome",
                "started",
                "duration",
                "exit",
                "progress",
                "instance",
                "spark_app",
                "log",
                "error",
            ],
            [
                "#",
                "outcome",
                "started",
                "duration",
                "exit",
                "progress",
                "instance",
                "spark app",
                "log",
                "error",
            ],
        )
    else:
        typer.echo("none yet")


def _params(values: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {value!r}", param_hint="--param")
        params[key.strip()] = item.strip()
    return params


def _index_params(action: str, partitions: str | None, drop: bool) -> dict[str, str]:
    """`--partitions` and `--drop` as the planning parameters of an index operation; the
    API checks the names (and that there are some)."""
    if action != INDEXING:
        if partitions is not None or drop:
            raise typer.BadParameter("only for index (indexing)", param_hint="--partitions/--drop")
        return {}
    params = {"partitions": partitions} if partitions is not None else {}
    return params | ({"drop": "true"} if drop else {})


def _one_action(argument: ActionName | None, option: ActionName | None) -> ActionName:
    """The action, given as the argument or as `--action` (the same one when both)."""
    if argument is None and option is None:
        raise typer.BadParameter("name the table service: tms ops submit ACTION or --action")
    if argument is not None and option is not None and argument.action != option.action:
        raise typer.BadParameter(
            f"two table services named: {argument.value} and --action {option.value}"
        )
    chosen = argument or option
    assert chosen is not None
    return chosen


@ops_app.command("submit")
def ops_submit(
    table: Annotated[str, typer.Option(help="The table (id or db.table).")],
    action: Annotated[
        ActionName | None, typer.Argument(help="The table service (or --action).")
    ] = None,
    action_option: Annotated[
        ActionName | None, typer.Option("--action", help="The table service, as an option.")
    ] = None,
    instant: Annotated[
        str | None, typer.Option(help="A pending plan's instant; default: the job plans one.")
    ] = None,
    owner: Annotated[str | None, typer.Option(help="Owner label.")] = None,
    queue: Annotated[str | None, typer.Option(help="Queue (default: the table's).")] = None,
    priority: Annotated[int | None, typer.Option(help="Higher runs first.")] = None,
    resource: Annotated[
        str | None, typer.Option(help="Driver:executor memory, e.g. 4g:4g.")
    ] = None,
    parallelism: Annotated[int | None, typer.Option(help="Spark parallelism.", min=1)] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            help="key=value for the job or Spark (repeat), e.g. hoodie.cleaner.commits.retained=2."
        ),
    ] = None,
    partitions: Annotated[
        str | None,
        typer.Option(
            help="index: comma-separated metadata partitions to build (files, column_stats, "
            "partition_stats, record_index); required for index."
        ),
    ] = None,
    drop: Annotated[
        bool,
        typer.Option("--drop", help="index: drop --partitions instead of building them (no plan)."),
    ] = False,
    executor: ExecutorOption = None,
    max_retries: Annotated[int | None, typer.Option(help="Retries after a failure.", min=0)] = None,
    retry_on_error: Annotated[
        bool, typer.Option(help="Retry failed attempts (with backoff).")
    ] = True,
    as_json: AsJson = False,
    url: Url = None,
    token: Token = None,
) -> None:
    """Submit an operation (RFC-43); submitting the same one again returns it unchanged.
    Without --executor the table policy's executor runs it, else the service's TMS_EXECUTOR.

    index: builds the metadata partitions --partitions names (drops them with --drop)."""
    action = _one_action(action, action_option)
    extra = _params(param or []) | _index_params(action.action, partitions, drop)
    with connect(url, token) as client:
        found = resolve_table(client, table)
        body: dict[str, Any] = {
            "db_name": found["db_name"],
            "table_name": found["table_name"],
            "instant": instant,
            "owner": owner,
            "queue": queue,
            "priority": priority,
            "resource": resource,
            "parallelism": parallelism,
            "executor": executor,
            "max_retries": max_retries,
            "retry_on_error": retry_on_error,
            "extra_params": extra,
        }
        operation = client.submit(action.action, {k: v for k, v in body.items() if v is not None})
    if as_json:
        echo_json(operation)
        return
    how = "submitted" if operation.get("created") else "already submitted"
    typer.echo(
        f"operation {operation['id']}: {operation['action']} of {qualified(operation)} "
        f"{how}, {operation['status']}"
    )


@ops_app.command("cancel")
def ops_cancel(
    operation_id: OperationId, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """Cancel a scheduled operation, or ask a running one's job to stop."""
    with connect(url, token) as client:
        operation = client.cancel(operation_id)
    if as_json:
        echo_json(operation)
        return
    if operation["status"] == "RUNNING":
        state = "cancel requested; its job stops at its next heartbeat"
    else:
        state = operation["status"]
    typer.echo(f"operation {operation['id']}: {state}")


@ops_app.command("retry")
def ops_retry(
    operation_id: OperationId, as_json: AsJson = False, url: Url = None, token: Token = None
) -> None:
    """Schedule a failed operation again, due now, with fresh retries; a cancelled one is
    terminal, so its retry is a new operation that plans anew."""
    with connect(url, token) as client:
        operation = client.retry(operation_id)
    if as_json:
        echo_json(operation)
        return
    if operation["id"] != operation_id:
        typer.echo(
            f"operation {operation_id} stays cancelled; its retry is operation "
            f"{operation['id']}: {operation['status']}, due now"
        )
        return
    typer.echo(f"operation {operation['id']}: {operation['status']} again, due now")
