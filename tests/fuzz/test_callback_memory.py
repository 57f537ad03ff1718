"""A commit callback's memory is a small multiple of its body: the worst case (the largest
body `TMS_MAX_CALLBACK_BYTES` allows, of the smallest write stats, the most of them per
byte) sent to a real `tms serve` raises its peak resident memory by at most
`BOUND_TIMES_BODY` times the body (docs/security.md states the figure)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.fuzz.conftest import CALLBACK_KEY, FuzzServer
from tms.config import load_settings

pytestmark = pytest.mark.fuzz

BOUND_TIMES_BODY = 4
"""What docs/security.md promises (about 3× measured, plus the allocator's slack)."""


def kib(pid: int, field: str) -> int:
    """A `/proc/<pid>/status` memory figure in KiB (VmRSS now, VmHWM the peak so far)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def worst_case_body(limit: int, base_path: str) -> bytes:
    """The most write stats that fit under `limit`: `{"path":"p/<n>"}` each."""
    head = (
        '{"commitTime":"20260101120000000","tableName":"mem","basePath":"'
        + base_path
        + '","hoodieWriteStat":['
    ).encode()
    stats, size, n = [], len(head) + 2, 0
    while True:
        stat = b'{"path":"p/%d"}' % n
        if size + len(stat) + 1 > limit:
            break
        stats.append(stat)
        size += len(stat) + 1
        n += 1
    return head + b",".join(stats) + b"]}"


def test_the_largest_callback_costs_a_small_multiple_of_its_body(
    fuzz_server: FuzzServer, tmp_path: Path
) -> None:
    limit = load_settings(config_file=False, environ={}).max_callback_bytes
    body = worst_case_body(limit, str(tmp_path / "mem"))
    assert limit - 64 < len(body) <= limit
    before = kib(fuzz_server.pid, "VmRSS")
    answer = httpx.post(
        f"{fuzz_server.url}/v1/hoodie/service/commit",
        content=body,
        headers={"HUDI-CALLBACK-KEY": CALLBACK_KEY, "Content-Type": "application/json"},
        timeout=600,
    )
    grew = (kib(fuzz_server.pid, "VmHWM") - before) * 1024
    assert answer.status_code < 500, answer.text
    print(f"a {len(body) / 2**20:.1f} MiB callback raised the peak RSS by {grew / 2**20:.1f} MiB")
    assert grew <= BOUND_TIMES_BODY * len(body), fuzz_server.output()
