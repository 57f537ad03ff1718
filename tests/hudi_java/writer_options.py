"""The Hudi writer options the README's "Using tms with Hudi writers" gives, one snippet per
integration, as the hudi_java tests use them: the README quotes these and
`tests/test_readme_writer_options.py` keeps the two the same.

Values in angle brackets are the user's: `filled` puts a test's own in.
"""

from __future__ import annotations

from collections.abc import Mapping

SERVICES_OFF_THE_WRITER = {
    "hoodie.compact.inline": "false",
    "hoodie.clean.automatic": "false",
}
"""The table services are tms's: a Spark batch writer of a merge-on-read table otherwise
compacts inline every 5 delta commits (running any pending plan, tms's included), and every
write cleans."""

COMMIT_CALLBACK = {
    "hoodie.write.commit.callback.on": "true",
    "hoodie.write.commit.callback.http.url": (
        "http://<tms host>:<tms port>/v1/hoodie/service/commit"
    ),
    "hoodie.write.commit.callback.http.api.key": "<callback key>",
}
"""Hudi's HTTP commit callback to tms (HoodieWriteCommitCallbackConfig)."""

TABLE_SERVICE_MANAGER = {
    "hoodie.table.service.manager.enabled": "true",
    "hoodie.table.service.manager.uris": "http://<tms host>:<tms port>",
    "hoodie.table.service.manager.actions": "compaction,replacecommit",
}
"""Hudi's table-service-manager client to tms (HoodieTableServiceManagerConfig): the writer
schedules plans and hands them over. 0.15 delegates clustering only when the actions name
`replacecommit`; 1.x takes it or `clustering`."""

REMOTE_VIEW_AND_MARKERS = {
    "hoodie.embed.timeline.server": "false",
    "hoodie.filesystem.view.type": "REMOTE_FIRST",
    "hoodie.filesystem.view.remote.host": "<tms host>",
    "hoodie.filesystem.view.remote.port": "<tms port>",
    "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
}
"""tms as the writer's timeline server: its file-system view and its markers."""

OPTIMISTIC_CONCURRENCY = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": (
        "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
    ),
    "hoodie.write.concurrency.early.conflict.detection.enable": "true",
    "hoodie.clean.failed.writes.policy": "LAZY",
}
"""Several writers and tms on one table: optimistic concurrency with the lock tms takes too,
early conflict detection on tms's markers, and failed writes rolled back lazily (never an
instant whose heartbeat lives, such as tms's)."""

SNIPPETS: dict[str, dict[str, str]] = {
    "services-off-the-writer": SERVICES_OFF_THE_WRITER,
    "commit-callback": COMMIT_CALLBACK,
    "table-service-manager": TABLE_SERVICE_MANAGER,
    "remote-view-and-markers": REMOTE_VIEW_AND_MARKERS,
    "optimistic-concurrency": OPTIMISTIC_CONCURRENCY,
}
"""README name of each snippet (`<!-- writer options: <name> -->` above its block)."""


def filled(snippet: Mapping[str, str], **values: object) -> dict[str, str]:
    """`snippet` with `<tms host>`, `<tms port>`, `<callback key>` replaced by `tms_host=`,
    `tms_port=`, `callback_key=`; a placeholder left unfilled is an error."""
    out = {}
    for key, value in snippet.items():
        for name, given in values.items():
            value = value.replace(f"<{name.replace('_', ' ')}>", str(given))
        if "<" in value:
            raise ValueError(f"{key}={value}: a placeholder is not filled")
        out[key] = value
    return out
