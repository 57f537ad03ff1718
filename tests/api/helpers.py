"""Payloads and builders shared by the API tests."""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.testclient import TestClient

_instants = count(1)


def instant() -> str:
    """A fresh 17-digit Hudi instant time."""
    return f"20260101{next(_instants):09d}"


def write_stat(
    *, log: bool, file_id: str = "a1b2c3d4-0", base: str = "20260101000000000"
) -> dict[str, Any]:
    """One HoodieWriteStat as Hudi's Jackson writes it (delta fields when `log`), with a
    field from some future version."""
    stat: dict[str, Any] = {
        "fileId": file_id,
        "path": f"2026/01/01/.{file_id}_{base}.log.1_0-1-0"
        if log
        else f"2026/01/01/{file_id}_0-1-0_{base}.parquet",
        "cdcStats": None,
        "prevCommit": base,
        "numWrites": 10,
        "numDeletes": 0,
        "numUpdateWrites": 10 if log else 0,
        "numInserts": 0 if log else 10,
        "totalWriteBytes": 4096,
        "totalWriteErrors": 0,
        "tempPath": None,
        "partitionPath": "2026/01/01",
        "totalLogRecords": 0,
        "totalLogFilesCompacted": 0,
        "totalLogSizeCompacted": 0,
        "totalUpdatedRecordsCompacted": 0,
        "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0,
        "totalRollbackBlocks": 0,
        "fileSizeInBytes": 4096,
        "minEventTime": None,
        "maxEventTime": None,
        "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": 12, "totalCreateTime": 0},
        "columnStats": {"present": False},
        "recordsStats": {"present": False},
        "someFutureStatField": [1, 2, 3],
    }
    if log:
        stat |= {
            "logVersion": 1,
            "logOffset": 0,
            "baseFile": f"{file_id}_0-1-0_{base}.parquet",
            "logFiles": [f".{file_id}_{base}.log.1_0-1-0"],
        }
    return stat


def callback_payload(
    commit_time: str,
    *,
    base_path: str = "/data/lake/trips",
    table_name: str = "trips",
    log: bool = True,
    stats: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What a released Hudi writer POSTs: `{"present": true}` for the Options it loses,
    and fields this service does not know."""
    return {
        "commitTime": commit_time,
        "tableName": table_name,
        "basePath": base_path,
        "hoodieWriteStat": stats if stats is not None else [write_stat(log=log)],
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
        "prevFilePaths": {"2026/01/01": ["2026/01/01/a1b2c3d4-0_0-1-0_20260101000000000.parquet"]},
        "extraContext": {"present": False},
        "someFutureField": {"nested": True},
    }


def notify(
    client: TestClient, payload: dict[str, Any], key: str = "hudi_write_commit_http_callback"
) -> Any:
    response = client.post(
        "/v1/hoodie/service/commit", json=payload, headers={"HUDI-CALLBACK-KEY": key}
    )
    assert response.status_code == 200, response.text
    return response.json()


def register(client: TestClient, name: str = "trips", **extra: Any) -> dict[str, Any]:
    body = {"db_name": "lake", "table_name": name, "base_path": f"/data/lake/{name}", **extra}
    response = client.post("/v1/hoodie/service/register", json=body, params={"pending": True})
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


def submit(client: TestClient, service: str = "compact", **body: Any) -> Any:
    return client.post(
        f"/v1/hoodie/service/{service}/submit",
        json={"db_name": "lake", "table_name": "trips", **body},
    )


def client_params(base_path: str, **extra: str) -> dict[str, str]:
    """Every parameter, as HoodieTableServiceManagerClient sends it (defaults included)."""
    return {
        "basepath": base_path,
        "db_name": "lake",
        "table_name": "trips",
        "instant": "",
        "execution_engine": "spark",
        "username": "default",
        "queue": "default",
        "resource": "spark:4g,4g",
        "parallelism": "100",
        "extra_params": "",
        "action": "REQUEST",
        **extra,
    }
