"""Base paths: one spelling per location, and the allow-list of schemes and prefixes."""

from __future__ import annotations

import pytest

from tms.base_path import BasePathError, check_base_path, normalize_base_path

DEFAULT_SCHEMES = ["file", "s3", "s3a", "gs", "abfs", "hdfs"]


@pytest.mark.parametrize(
    "spelling", ["file:///x/y", "/x/y", "/x//y/", "/x/./y", "/x/z/../y", "file:/x/y", " /x/y "]
)
def test_local_spellings_are_one_table(spelling: str) -> None:
    assert normalize_base_path(spelling) == "/x/y"


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("s3://bucket/t/", "s3://bucket/t"),
        ("S3A://bucket//a/./b/../t", "s3a://bucket/a/t"),
        ("gs://bucket", "gs://bucket"),
        ("hdfs:///warehouse/t/", "hdfs:///warehouse/t"),
        ("hdfs://nn:8020/warehouse/t", "hdfs://nn:8020/warehouse/t"),
        ("abfs://box@acct.dfs.core.windows.net/t", "abfs://box@acct.dfs.core.windows.net/t"),
        ("file://localhost/x/y", "/x/y"),
    ],
)
def test_urls_are_normalized(given: str, normal: str) -> None:
    assert normalize_base_path(given) == normal
    assert normalize_base_path(normal) == normal  # idempotent


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("../../etc", "not an absolute path"),
        ("relative/t", "not an absolute path"),
        ("", "empty"),
        ("/../etc", "climbs above the root"),
        ("/x/../../etc", "climbs above the root"),
        ("zip::file:///t.zip", "chained URLs"),
        ("simplecache::s3://bucket/t", "chained URLs"),
        ("file://otherhost/x", "another host"),
        ("file:x/y", "not an absolute path"),
        ("s3:bucket/t", "s3://authority/path"),
        ("s3:///t", "bucket"),
        ("s3://bucket/t?versionId=1", "query"),
    ],
)
def test_paths_naming_no_single_location_are_refused(given: str, reason: str) -> None:
    with pytest.raises(BasePathError, match=reason):
        normalize_base_path(given)


def check(raw: str, prefixes: list[str] | None = None, schemes: list[str] | None = None) -> str:
    return check_base_path(
        raw,
        schemes=DEFAULT_SCHEMES if schemes is None else schemes,
        prefixes=["/"] if prefixes is None else prefixes,
    )


def test_defaults_admit_any_local_path_but_the_root_and_the_usual_stores() -> None:
    assert check("/etc") == "/etc"  # refused later: no hoodie.properties there
    assert check("/data/lake/t/") == "/data/lake/t"
    assert check("s3a://bucket/t") == "s3a://bucket/t"
    for root in ("/", "file:///", "/x/..", "//"):
        with pytest.raises(BasePathError, match="outside the allowed prefixes"):
            check(root)


@pytest.mark.parametrize(
    "given",
    ["memory://t", "ftp://host/t", "webhdfs://127.0.0.1:50070/t", "http://169.254.169.254/x"],
)
def test_schemes_outside_the_allow_list_are_refused(given: str) -> None:
    with pytest.raises(BasePathError, match=r"scheme .* is not allowed"):
        check(given)


def test_local_paths_are_refused_when_file_is_not_allowed() -> None:
    with pytest.raises(BasePathError, match="scheme 'file' is not allowed"):
        check("/data/t", schemes=["s3"])


def test_prefixes_match_whole_components_of_the_normalized_path() -> None:
    prefixes = ["/lake/sales", "s3://bucket/tables/"]
    assert check("/lake/sales/t", prefixes) == "/lake/sales/t"
    assert check("/lake/sales/x/../t", prefixes) == "/lake/sales/t"
    assert check("s3://bucket/tables/t", prefixes) == "s3://bucket/tables/t"
    assert check("gs://other/t", prefixes) == "gs://other/t"  # gs has no prefix: any
    for outside in (
        "/lake/sales2/t",
        "/lake/sales",
        "/lake/sales/../hr/t",
        "/etc/t",
        "s3://bucket/other/t",
        "s3://bucket2/tables/t",
    ):
        with pytest.raises(BasePathError, match="outside the allowed prefixes"):
            check(outside, prefixes)
