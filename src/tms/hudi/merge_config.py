"""How the records of a table merge: the merge mode and the ordering fields, from its properties.

Hudi decides this from `hoodie.record.merge.mode`, the merge strategy id and the payload class,
inferring what a table does not say (`HoodieTableConfig.inferMergingConfigsForPreV9Table`):
a payload class or strategy id implies a mode (the strategy id first from table version 8,
the payload class before); with neither, the stated mode, else event time when the table has
ordering fields and commit time when it has none. Event time without ordering fields orders by
commit time. What we cannot reproduce (custom mergers, custom or partial-update payloads,
partial-update modes, merge properties such as delete markers, virtual keys of key generators
whose record keys cannot be computed) is refused with
the reason, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import (
    PAYLOAD_CLASS,
    RECORD_MERGE_MODE,
    RECORD_MERGE_STRATEGY_ID,
    TableConfig,
)
from tms.hudi.record_keys import key_generation_refusals

__all__ = [
    "MergeMode",
    "RecordMerging",
    "merge_refusals",
    "record_merging",
]

PAYLOAD_CLASS_KEYS = (
    PAYLOAD_CLASS,
    "hoodie.table.payload.class",
    "hoodie.datasource.write.payload.class",
    "hoodie.table.legacy.payload.class",
)
"""Where tables record their payload class: version 6 and 8 write the first; version 9 keeps
the class a table was created with under the last (`LEGACY_PAYLOAD_CLASS_NAME`)."""
STRATEGY_ID_KEYS = (RECORD_MERGE_STRATEGY_ID, "hoodie.compaction.record.merger.strategy")
PARTIAL_UPDATE_MODE = "hoodie.table.partial.update.mode"
MERGE_PROPERTY_PREFIX = "hoodie.record.merge.property."

_MODEL = "org.apache.hudi.common.model."
EVENT_TIME_PAYLOADS = frozenset(
    {_MODEL + "DefaultHoodieRecordPayload", _MODEL + "EventTimeAvroPayload"}
)
COMMIT_TIME_PAYLOADS = frozenset({_MODEL + "OverwriteWithLatestAvroPayload"})
EVENT_TIME_STRATEGY_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"


class MergeMode(StrEnum):
    """Hudi's `RecordMergeMode` values."""

    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    CUSTOM = "CUSTOM"


@dataclass(frozen=True)
class RecordMerging:
    """The merge mode of a table and the ordering fields it declares."""

    mode: MergeMode
    ordering_fields: tuple[str, ...]

    @property
    def compared_fields(self) -> tuple[str, ...]:
        """The fields whose values decide between two versions of a record, compared as a
        tuple; empty when the later write always wins."""
        if self.mode is MergeMode.EVENT_TIME_ORDERING:
            return self.ordering_fields
        return ()


def record_merging(config: TableConfig) -> RecordMerging:
    """How the table's records merge; `UnsupportedTableError` says why when we cannot."""
    mode, reasons = _infer(config)
    if reasons:
        raise UnsupportedTableError("; ".join(reasons))
    return RecordMerging(mode, tuple(config.ordering_fields))


def merge_refusals(config: TableConfig) -> list[str]:
    """Why records of this table cannot be merged as Hudi merges them; empty when they can."""
    return _infer(config)[1]


def _first(props: Mapping[str, str], keys: tuple[str, ...]) -> tuple[str, str]:
    for key in keys:
        value = props.get(key, "").strip()
        if value:
            return key, value
    return "", ""


def _mode_of_payload(payload: str) -> MergeMode | None:
    if not payload:
        return None
    if payload in EVENT_TIME_PAYLOADS:
        return MergeMode.EVENT_TIME_ORDERING
    if payload in COMMIT_TIME_PAYLOADS:
        return MergeMode.COMMIT_TIME_ORDERING
    return MergeMode.CUSTOM


def _mode_of_strategy(strategy_id: str) -> MergeMode | None:
    if not strategy_id:
        return None
    if strategy_id == EVENT_TIME_STRATEGY_ID:
        return MergeMode.EVENT_TIME_ORDERING
    if strategy_id == COMMIT_TIME_STRATEGY_ID:
        return MergeMode.COMMIT_TIME_ORDERING
    return MergeMode.CUSTOM


def _infer(config: TableConfig) -> tuple[MergeMode, list[str]]:
    """The merge mode Hudi infers for the table, and the reasons we cannot honour it."""
    props = config.props
    reasons: list[str] = []
    stated_text = props.get(RECORD_MERGE_MODE, "").strip().upper()
    stated: MergeMode | None = None
    if stated_text:
        try:
            stated = MergeMode(stated_text)
        except ValueError:
            reasons.append(f"{RECORD_MERGE_MODE}={stated_text!r} is not a record merge mode")
    payload_key, payload = _first(props, PAYLOAD_CLASS_KEYS)
    strategy_key, strategy_id = _first(props, STRATEGY_ID_KEYS)
    by_payload, by_strategy = _mode_of_payload(payload), _mode_of_strategy(strategy_id)
    if by_payload is None and by_strategy is None:
        default = MergeMode.EVENT_TIME_ORDERING if config.ordering_fields else None
        mode = stated or default or MergeMode.COMMIT_TIME_ORDERING
    elif config.table_version >= 8:
        mode = by_strategy or by_payload or MergeMode.CUSTOM
    else:
        mode = by_payload or by_strategy or MergeMode.CUSTOM
    if mode is MergeMode.CUSTOM or stated is MergeMode.CUSTOM:
        reasons.append(_custom_reason(stated, payload_key, payload, strategy_key, strategy_id))
    elif by_payload is MergeMode.CUSTOM:
        # version 9 keeps a deprecated payload's class only as a record; the partial-update and
        # merge properties it implies are refused below, any other class is refused here
        reasons.append(f"payload class {payload_key}={payload} is not handled")
    elif stated is not None and stated is not mode:
        reasons.append(
            f"{RECORD_MERGE_MODE}={stated} disagrees with the payload class or merge strategy"
            f" ({payload or strategy_id}), which imply {mode}"
        )
    if not config.populate_meta_fields:
        reasons += [f"{_VIRTUAL_KEYS}: {reason}" for reason in key_generation_refusals(config)]
    partial = props.get(PARTIAL_UPDATE_MODE, "").strip().upper()
    if partial and partial != "NONE":
        reasons.append(f"{PARTIAL_UPDATE_MODE}={partial}: partial updates are not handled")
    merge_properties = sorted(k for k in props if k.startswith(MERGE_PROPERTY_PREFIX))
    if merge_properties:
        reasons.append(
            f"merge properties {', '.join(merge_properties)} (custom delete or partial-update"
            " markers) are not handled"
        )
    return mode, reasons


_VIRTUAL_KEYS = "hoodie.populate.meta.fields=false (virtual keys)"
"""Merging matches versions of a record by its key; without meta fields the key is computed from
the data fields as the table's key generator does (`tms.hudi.record_keys`); a key generator
whose keys cannot be computed is refused."""


def _custom_reason(
    stated: MergeMode | None, payload_key: str, payload: str, strategy_key: str, strategy_id: str
) -> str:
    """CUSTOM merging runs the table's own Java merger or payload, which we cannot run."""
    what = [f"{RECORD_MERGE_MODE}=CUSTOM"] if stated is MergeMode.CUSTOM else []
    if payload and _mode_of_payload(payload) is MergeMode.CUSTOM:
        what.append(f"payload class {payload_key}={payload}")
    if strategy_id and _mode_of_strategy(strategy_id) is MergeMode.CUSTOM:
        what.append(f"merge strategy {strategy_key}={strategy_id}")
    return (
        f"record merge mode CUSTOM ({', '.join(what) or 'inferred'}) runs the table's own merger;"
        " only EVENT_TIME_ORDERING and COMMIT_TIME_ORDERING are handled"
    )
