"""Generated requests against the open timeline-server routes of a real `tms serve`.

The view (`/v1/hoodie/view/…`) and marker (`/v1/hoodie/marker/…`) routes are Hudi's
protocol, outside the OpenAPI document, and take no credentials: here their parameters are
drawn from Hudi's own values (the registered table, its instants, partitions and file ids,
marker names of real files), from their near misses (traversal, other tables, completed
instants, trailing newlines, other digits) and from arbitrary text. Every answer must be
below 500, and afterwards nothing on disk may have changed but marker files inside
`.hoodie/.temp/<the pending instant>/`. Derandomized and bounded by count, so CI sends the
same requests every time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.api.conftest import mor_writer
from tests.fuzz.conftest import TOKENS, FuzzServer
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition

pytestmark = pytest.mark.fuzz

EXAMPLES = 1000
"""Requests per route family: a count, not a clock."""
MARKER_ROUTES = [
    ("POST", "create"),
    ("GET", "all"),
    ("GET", "create-and-merge"),
    ("GET", "append"),
    ("GET", "dir/exists"),
    ("POST", "dir/delete"),
]
VIEW_ROUTES = [
    "slices/all/latest",
    "slices/partition/latest",
    "slices/uncompacted/partition/latest",
    "slices/beforeoron/latest",
    "slices/merged/beforeoron/latest",
    "slices/range/latest",
    "slices/file/latest",
    "basefiles/all/beforeoron",
    "basefiles/latest/partition",
    "basefiles/on/latest",
    "basefiles/range/latest",
    "filegroups/all/partition",
    "filegroups/replaced/beforeoron",
    "compactions/pending",
    "clustering/pending",
    "timeline/instants/all",
    "timeline/instants/last",
    "timeline/instants/hash",
    "refresh",
    "inittimeline",
    "loadallpartitions",
    "loadpartitions",
    "no/such/call",
    "../../v1/tables",
]
BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
"""The same requests on every run, no shrinking, no clock."""
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)


def tree(root: Path) -> dict[str, str]:
    """Every file under `root`, relative path to a digest of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def scene(
    fuzz_server: FuzzServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, str, dict[str, str]]:
    """A registered merge-on-read table with one pending delta commit: (root folder, base
    path, pending instant, committed instant)."""
    root = tmp_path_factory.mktemp("timeline-fuzz")
    writer = mor_writer(root)
    hudi = HudiTable.open(writer.table.base_path)
    timeline = hudi.timeline()
    committed = timeline.commits()[-1].requested_time
    pending = new_instant_time(timeline.instants)
    requested = request(hudi.storage, hudi.config, pending, Action.DELTA_COMMIT)
    transition(hudi.storage, hudi.config, requested, State.INFLIGHT)
    answer = httpx.post(
        f"{fuzz_server.url}/v1/tables",
        json={"db_name": "lake", "table_name": "trips", "base_path": hudi.base_path},
        headers={"Authorization": f"Bearer {TOKENS['admin']}"},
        timeout=60,
    )
    assert answer.status_code == 201, answer.text
    return root, hudi.base_path, pending, {"committed": committed}


def marker_values(base: str, pending: str, committed: str) -> tuple[st.SearchStrategy[str], ...]:
    hudi = HudiTable.open(base)
    files = [
        f"{s.partition_path + '/' if s.partition_path else ''}{s.base_file.name}"
        for s in hudi.file_system_view().latest_file_slices()
        if s.base_file is not None
    ]
    instants = st.sampled_from([pending, committed, "20260101000000000", f"{pending}\n", "٠" * 17])
    folders = st.one_of(
        instants.map(lambda ts: f"{base}/.hoodie/.temp/{ts}"),
        instants.map(lambda ts: f"{base}/.hoodie/.temp/../../{ts}"),
        instants.map(lambda ts: f"{base}/.hoodie/metadata/.hoodie/.temp/{ts}"),
        instants.map(lambda ts: f"file://{base}/.hoodie/.temp/{ts}/"),
        TEXT,
    )
    kinds = st.sampled_from(["CREATE", "MERGE", "APPEND", "DELETE", ""])
    names = st.one_of(
        st.tuples(st.sampled_from(files), kinds).map(lambda f: f"{f[0]}.marker.{f[1]}"),
        st.tuples(
            st.sampled_from(["", "p", "..", "../..", ".hoodie", "/abs", "a\\b"]), TEXT, kinds
        ).map(lambda f: f"{f[0]}/{f[1]}.marker.{f[2]}"),
        TEXT,
    )
    base_paths = st.one_of(st.none(), st.just(base), TEXT)
    return folders, names, base_paths


def test_marker_routes_answer_below_500_and_write_only_into_the_pending_instant(
    fuzz_server: FuzzServer, scene: tuple[Path, str, str, dict[str, str]]
) -> None:
    root, base, pending, instants = scene
    before = tree(root)
    folders, names, base_paths = marker_values(base, pending, instants["committed"])
    client = httpx.Client(base_url=fuzz_server.url, timeout=60)

    @BOUNDED
    @given(st.sampled_from(MARKER_ROUTES), folders, names, base_paths)
    def send(route: tuple[str, str], folder: str, name: str, base_path: str | None) -> None:
        method, path = route
        params = {"markerdirpath": folder, "markername": name}
        if base_path is not None:
            params["basepath"] = base_path
        answer = client.request(method, f"/v1/hoodie/marker/{path}", params=params)
        assert answer.status_code < 500, (method, path, params, answer.text)
        assert "Traceback" not in answer.text

    try:
        send()
    finally:
        client.close()
    after = tree(root)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    table = Path(base).relative_to(root)
    allowed = f"{table}/.hoodie/.temp/{pending}/"
    assert {p for p in changed if not p.startswith(allowed)} == set(), fuzz_server.output()


def test_view_routes_answer_below_500_and_write_nothing(
    fuzz_server: FuzzServer, scene: tuple[Path, str, str, dict[str, str]]
) -> None:
    root, base, pending, instants = scene
    hudi = HudiTable.open(base)
    file_ids = [s.file_id for s in hudi.file_system_view().latest_file_slices()]
    partitions = sorted({s.partition_path for s in hudi.file_system_view().latest_file_slices()})
    instant_values = st.one_of(
        st.sampled_from([pending, instants["committed"], "0", "99999999999999999", f"{pending}\n"]),
        TEXT,
    )
    params = st.fixed_dictionaries(
        {},
        optional={
            "basepath": st.one_of(st.just(base), st.just(f"{base}/.."), TEXT),
            "partition": st.one_of(st.sampled_from([*partitions, "..", "/etc", ".hoodie"]), TEXT),
            "fileid": st.one_of(st.sampled_from([*file_ids, "../x"]), TEXT),
            "maxinstant": instant_values,
            "mininstant": instant_values,
            "instant": instant_values,
            "lastinstantts": instant_values,
            "timelinehash": st.one_of(st.just("abc123"), TEXT),
            "instants": st.one_of(instant_values, TEXT),
            "includependingcompaction": st.sampled_from(["true", "false", "x"]),
            "refreshoff": st.sampled_from(["true", "false"]),
        },
    )
    before = tree(root)
    client = httpx.Client(base_url=fuzz_server.url, timeout=60)

    @BOUNDED
    @given(st.sampled_from(VIEW_ROUTES), st.sampled_from(["GET", "POST"]), params)
    def send(path: str, method: str, query: dict[str, str]) -> None:
        answer = client.request(method, f"/v1/hoodie/view/{path}", params=query)
        assert answer.status_code < 500, (method, path, query, answer.text)

    try:
        send()
    finally:
        client.close()
    assert tree(root) == before, fuzz_server.output()
