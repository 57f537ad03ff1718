"""Avro plans and metadata of Hudi's timeline: schemas, container round trips, garbage."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.codec import NAMESPACE, decode, encode, load_schema

REQUIRED = [
    "HoodieCompactionOperation",
    "HoodieCompactionPlan",
    "HoodieClusteringGroup",
    "HoodieClusteringPlan",
    "HoodieClusteringStrategy",
    "HoodieSliceInfo",
    "HoodieRequestedReplaceMetadata",
    "HoodieCleanerPlan",
    "HoodieCleanFileInfo",
    "HoodieActionInstant",
    "HoodieCleanMetadata",
    "HoodieCleanPartitionMetadata",
    "HoodieRollbackPlan",
    "HoodieRollbackRequest",
    "HoodieRollbackMetadata",
    "HoodieRollbackPartitionMetadata",
    "HoodieSavepointMetadata",
    "HoodieSavepointPartitionMetadata",
    "HoodieCommitMetadata",
    "HoodieWriteStat",
    "HoodieReplaceCommitMetadata",
    "HoodieInstantInfo",
]

TS = "20240101120000123"
FILE_ID = "a1b2c3d4-0000-0000-0000-000000000001-0"
BASE_FILE = f"{FILE_ID}_0-5-7_{TS}.parquet"
LOG_FILE = f".{FILE_ID}_{TS}.log.1_0-30-40"

# One realistic record per timeline file kind; encode fills the rest.
SAMPLES: dict[str, dict[str, Any]] = {
    "HoodieCompactionPlan": {
        "operations": [
            {
                "baseInstantTime": TS,
                "deltaFilePaths": [LOG_FILE],
                "dataFilePath": BASE_FILE,
                "fileId": FILE_ID,
                "partitionPath": "2024/01/01",
                "metrics": {"TOTAL_LOG_FILES": 1.0, "TOTAL_IO_MB": 12.5},
            }
        ],
        "version": 2,
    },
    "HoodieRequestedReplaceMetadata": {
        "operationType": "CLUSTER",
        "clusteringPlan": {
            "inputGroups": [
                {
                    "slices": [
                        {
                            "dataFilePath": f"2024/01/01/{BASE_FILE}",
                            "deltaFilePaths": [],
                            "fileId": FILE_ID,
                            "partitionPath": "2024/01/01",
                        }
                    ],
                    "metrics": {"TOTAL_FILE_SIZE": 1024.0},
                    "numOutputFileGroups": 1,
                }
            ],
            "strategy": {
                "strategyClassName": "org.apache.hudi.client.clustering.run.strategy."
                "SparkSortAndSizeExecutionStrategy",
                "strategyParams": {"hoodie.clustering.plan.strategy.sort.columns": "ts"},
            },
            "preserveHoodieMetadata": True,
        },
    },
    "HoodieCleanerPlan": {
        "earliestInstantToRetain": {"timestamp": TS, "action": "commit", "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": TS,
        "policy": "KEEP_LATEST_COMMITS",
        "filePathsToBeDeletedPerPartition": {
            "2024/01/01": [{"filePath": f"2024/01/01/{BASE_FILE}", "isBootstrapBaseFile": False}]
        },
        "version": 2,
    },
    "HoodieCleanMetadata": {
        "startCleanTime": TS,
        "timeTakenInMillis": 42,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": TS,
        "partitionMetadata": {
            "2024/01/01": {
                "partitionPath": "2024/01/01",
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": [BASE_FILE],
                "successDeleteFiles": [BASE_FILE],
                "failedDeleteFiles": [],
            }
        },
        "version": 2,
    },
    "HoodieRollbackPlan": {
        "instantToRollback": {"commitTime": TS, "action": "deltacommit"},
        "RollbackRequests": [
            {"partitionPath": "2024/01/01", "fileId": FILE_ID, "latestBaseInstant": TS}
        ],
    },
    "HoodieRollbackMetadata": {
        "startRollbackTime": TS,
        "timeTakenInMillis": 7,
        "totalFilesDeleted": 1,
        "commitsRollback": [TS],
        "partitionMetadata": {
            "2024/01/01": {
                "partitionPath": "2024/01/01",
                "successDeleteFiles": [BASE_FILE],
                "failedDeleteFiles": [],
                "rollbackLogFiles": {LOG_FILE: 120},
            }
        },
        "instantsRollback": [{"commitTime": TS, "action": "commit"}],
    },
    "HoodieSavepointMetadata": {
        "savepointedBy": "tms",
        "savepointedAt": 1704110400000,
        "comments": "before backfill",
        "partitionMetadata": {
            "2024/01/01": {"partitionPath": "2024/01/01", "savepointDataFile": [BASE_FILE]}
        },
    },
    "HoodieCommitMetadata": {
        "partitionToWriteStats": {
            "2024/01/01": [
                {
                    "fileId": FILE_ID,
                    "path": f"2024/01/01/{BASE_FILE}",
                    "prevCommit": "null",
                    "numWrites": 10,
                    "numInserts": 10,
                    "runtimeStats": {"totalCreateTime": 5},
                }
            ]
        },
        "compacted": False,
        "extraMetadata": {"schema": "{}"},
        "operationType": "INSERT",
    },
    "HoodieReplaceCommitMetadata": {
        "partitionToWriteStats": {"2024/01/01": []},
        "operationType": "CLUSTER",
        "partitionToReplaceFileIds": {"2024/01/01": [FILE_ID]},
    },
}


def _subset(expected: Any, actual: Any) -> bool:
    """Every value given in ``expected`` is in ``actual`` (records may have more fields)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _record_definitions(schema: Any, out: list[str]) -> list[str]:
    if isinstance(schema, list):
        for branch in schema:
            _record_definitions(branch, out)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            out.append(schema["name"])
            for fld in schema["fields"]:
                _record_definitions(fld["type"], out)
        elif schema.get("type") == "array":
            _record_definitions(schema["items"], out)
        elif schema.get("type") == "map":
            _record_definitions(schema["values"], out)
    return out


# -- schemas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REQUIRED)
def test_required_schema_is_self_contained_and_named_like_hudi(name: str) -> None:
    schema = load_schema(name)
    assert schema["name"] == name
    assert schema["namespace"] == NAMESPACE
    # No external names needed: fastavro parses it on its own.
    fastavro.parse_schema(schema)
    names = _record_definitions(schema, [])
    assert len(names) == len(set(names)), "a named type defined twice breaks Java's parser"


def test_schema_names_and_full_names() -> None:
    assert set(REQUIRED) <= set(avro_codec.schema_names())
    assert load_schema(f"{NAMESPACE}.HoodieCleanerPlan") == load_schema("HoodieCleanerPlan")
    with pytest.raises(KeyError):
        load_schema("HoodieNoSuchPlan")
    with pytest.raises(KeyError):
        load_schema("com.example.HoodieCleanerPlan")


def test_load_schema_returns_a_private_copy() -> None:
    schema = load_schema("HoodieCompactionPlan")
    schema["fields"].clear()
    assert load_schema("HoodieCompactionPlan")["fields"]


def _first_branch_accepts(first: Any, default: Any) -> bool:
    checks: dict[str, Any] = {
        "null": lambda v: v is None,
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
    }
    if isinstance(first, str) and first in checks:
        return bool(checks[first](default))
    kind = first.get("type") if isinstance(first, dict) else None
    if kind == "array":
        return isinstance(default, list)
    if kind == "map":
        return isinstance(default, dict)
    return False


@pytest.mark.parametrize("name", avro_codec.schema_names())
def test_defaults_are_valid_for_javas_parser(name: str) -> None:
    """Java Avro rejects a union default that does not match the union's first branch."""
    for fld in load_schema(name)["fields"]:
        if "default" not in fld:
            continue
        first = fld["type"][0] if isinstance(fld["type"], list) else fld["type"]
        assert _first_branch_accepts(first, fld["default"]), (name, fld["name"])


def test_field_names_match_hudi() -> None:
    def names(schema: str) -> list[str]:
        return [f["name"] for f in load_schema(schema)["fields"]]

    assert names("HoodieCompactionOperation") == [
        "baseInstantTime",
        "deltaFilePaths",
        "dataFilePath",
        "fileId",
        "partitionPath",
        "metrics",
        "bootstrapFilePath",
    ]
    assert names("HoodieRollbackPlan") == ["instantToRollback", "RollbackRequests", "version"]
    assert names("HoodieCleanerPlan")[:3] == [
        "earliestInstantToRetain",
        "lastCompletedCommitTimestamp",
        "policy",
    ]
    assert names("HoodieSavepointMetadata")[0] == "savepointedBy"
    assert "partitionToReplaceFileIds" in names("HoodieReplaceCommitMetadata")


# -- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip(name: str) -> None:
    data = encode(name, SAMPLES[name])
    assert data.startswith(b"Obj\x01")
    decoded = decode(data)
    assert _subset(SAMPLES[name], decoded)
    assert decode(data, name) == decoded


def test_container_is_one_record_null_codec_with_hudi_record_name() -> None:
    data = encode("HoodieCompactionPlan", SAMPLES["HoodieCompactionPlan"])
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == "null"
    writer_schema = reader.writer_schema
    assert isinstance(writer_schema, dict)
    assert writer_schema["name"] == f"{NAMESPACE}.HoodieCompactionPlan"
    assert len(list(reader)) == 1
    embedded = json.loads(reader.metadata["avro.schema"])
    names = _record_definitions(embedded, [])
    assert f"{NAMESPACE}.HoodieCompactionOperation" in names
    assert len(names) == len(set(names))


def test_deflate_codec_is_optional() -> None:
    data = encode("HoodieCleanerPlan", SAMPLES["HoodieCleanerPlan"], codec="deflate")
    assert fastavro.reader(io.BytesIO(data)).codec == "deflate"
    assert _subset(SAMPLES["HoodieCleanerPlan"], decode(data))
    with pytest.raises(ValueError, match="codec"):
        encode("HoodieCleanerPlan", SAMPLES["HoodieCleanerPlan"], codec="snappy-ish")


def test_defaults_are_filled() -> None:
    plan = decode(
        encode(
            "HoodieCompactionPlan",
            {"operations": [{"fileId": FILE_ID}], "strategy": {"compactorClassName": "X"}},
        )
    )
    assert plan["version"] == 1
    assert plan["extraMetadata"] is None
    assert plan["missingSchedulePartitions"] is None
    assert plan["strategy"] == {"compactorClassName": "X", "strategyParams": None, "version": 1}
    operation = plan["operations"][0]
    # baseInstantTime has no default in Hudi's schema but is nullable: filled with null.
    assert operation["baseInstantTime"] is None
    assert operation["deltaFilePaths"] is None

    cleaner = decode(encode("HoodieCleanerPlan", {"policy": "KEEP_LATEST_FILE_VERSIONS"}))
    assert cleaner["lastCompletedCommitTimestamp"] == ""
    assert cleaner["earliestInstantToRetain"] is None

    group = decode(encode("HoodieClusteringGroup", {"slices": [{"fileId": FILE_ID}]}))
    assert group["numOutputFileGroups"] == 1
    assert group["slices"][0]["version"] == 1

    rollback = decode(encode("HoodieRollbackRequest", {"partitionPath": ""}))
    assert rollback["filesToBeDeleted"] == []


def test_defaults_are_not_shared_between_records() -> None:
    first = decode(encode("HoodieRollbackMetadata", SAMPLES["HoodieRollbackMetadata"]))
    second = decode(
        encode(
            "HoodieRollbackMetadata",
            {k: v for k, v in SAMPLES["HoodieRollbackMetadata"].items() if k != "instantsRollback"},
        )
    )
    assert second["instantsRollback"] == []
    assert first["instantsRollback"] == [{"commitTime": TS, "action": "commit"}]


# -- errors -----------------------------------------------------------------------------------


def test_missing_required_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="policy"):
        encode("HoodieCleanerPlan", {})


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="bogus"):
        encode("HoodieCompactionPlan", {"operations": [{"fileId": FILE_ID, "bogus": 1}]})


def test_wrong_type_is_rejected() -> None:
    with pytest.raises(ValueError):
        encode("HoodieCleanerPlan", {"policy": 3})
    with pytest.raises(ValueError):
        encode("HoodieCompactionPlan", {"operations": {"not": "a list"}})
    with pytest.raises(ValueError):
        encode("HoodieCleanMetadata", {**SAMPLES["HoodieCleanMetadata"], "timeTakenInMillis": "x"})


def test_unknown_schema_name_is_rejected() -> None:
    with pytest.raises(KeyError):
        encode("HoodieNoSuchPlan", {})


def _garbled() -> list[bytes]:
    good = encode("HoodieCompactionPlan", SAMPLES["HoodieCompactionPlan"])
    middle = bytearray(good)
    for i in range(len(middle) - 60, len(middle) - 20):
        middle[i] ^= 0xFF
    return [
        b"",
        b"{}",
        b"not avro at all",
        b"Obj\x01",
        b"Obj\x01" + b"\xff" * 40,
        good[:30],
        good[: len(good) // 2],
        good[:-3],
        bytes(middle),
    ]


@pytest.mark.parametrize("data", _garbled())
def test_garbled_bytes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_container_without_record_raises_value_error() -> None:
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(load_schema("HoodieCleanerPlan")), [])
    with pytest.raises(ValueError, match="no record"):
        decode(buffer.getvalue())


# -- files written by other Hudi versions -----------------------------------------------------


def test_older_writer_schema_is_resolved_against_ours() -> None:
    """A Hudi 0.5-era compaction plan: no strategy, externalDataFilePath instead of bootstrap."""
    old_schema = {
        "namespace": NAMESPACE,
        "type": "record",
        "name": "HoodieCompactionPlan",
        "fields": [
            {
                "name": "operations",
                "type": [
                    "null",
                    {
                        "type": "array",
                        "items": {
                            "name": "HoodieCompactionOperation",
                            "type": "record",
                            "fields": [
                                {"name": "baseInstantTime", "type": ["null", "string"]},
                                {"name": "fileId", "type": ["null", "string"]},
                                {
                                    "name": "externalDataFilePath",
                                    "type": ["null", "string"],
                                    "default": None,
                                },
                            ],
                        },
                    },
                ],
                "default": None,
            },
            {"name": "version", "type": ["int", "null"], "default": 1},
        ],
    }
    buffer = io.BytesIO()
    record = {
        "operations": [{"baseInstantTime": TS, "fileId": FILE_ID, "externalDataFilePath": None}],
        "version": 1,
    }
    fastavro.writer(buffer, fastavro.parse_schema(old_schema), [record])
    plan = decode(buffer.getvalue(), "HoodieCompactionPlan")
    assert plan["strategy"] is None
    assert plan["missingSchedulePartitions"] is None
    assert plan["operations"][0]["fileId"] == FILE_ID
    assert plan["operations"][0]["bootstrapFilePath"] is None
    assert "externalDataFilePath" not in plan["operations"][0]
    # Without a reader schema the writer's own fields come back.
    assert "externalDataFilePath" in decode(buffer.getvalue())["operations"][0]


def test_java_style_inline_definitions_decode() -> None:
    """Hudi's Java writer inlines nested records where first used, as in its .avsc files."""
    java_style = {
        "type": "record",
        "name": "HoodieCleanerPlan",
        "namespace": NAMESPACE,
        "fields": [
            {
                "name": "earliestInstantToRetain",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "HoodieActionInstant",
                        "fields": [
                            {"name": "timestamp", "type": "string"},
                            {"name": "action", "type": "string"},
                            {"name": "state", "type": "string"},
                        ],
                    },
                ],
                "default": None,
            },
            {"name": "policy", "type": "string"},
            {
                "name": "filesToBeDeletedPerPartition",
                "type": [
                    "null",
                    {"type": "map", "values": {"type": "array", "items": "string"}},
                ],
                "default": None,
            },
            {"name": "version", "type": ["int", "null"], "default": 1},
        ],
    }
    buffer = io.BytesIO()
    fastavro.writer(
        buffer,
        fastavro.parse_schema(java_style),
        [
            {
                "earliestInstantToRetain": {
                    "timestamp": TS,
                    "action": "commit",
                    "state": "COMPLETED",
                },
                "policy": "KEEP_LATEST_COMMITS",
                "filesToBeDeletedPerPartition": {"p": [BASE_FILE]},
                "version": 1,
            }
        ],
    )
    plan = decode(buffer.getvalue(), "HoodieCleanerPlan")
    assert plan["earliestInstantToRetain"]["state"] == "COMPLETED"
    assert plan["filesToBeDeletedPerPartition"] == {"p": [BASE_FILE]}
    assert plan["lastCompletedCommitTimestamp"] == ""
    assert plan["filePathsToBeDeletedPerPartition"] is None
