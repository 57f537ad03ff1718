"""The filesystem behind a base path's scheme, or a refusal that says what to install.

`s3://` and `s3a://` (what Spark's Hadoop writers put in Hudi's metadata) both go to s3fs,
installed with the package; `gs://` and `abfs://` need the `tms[gcs]` and `tms[azure]`
extras; `hdfs://` goes to pyarrow's HDFS filesystem, which needs a Hadoop client (libhdfs,
`HADOOP_HOME`, `CLASSPATH`) on the machine. Credentials and endpoints come from the standard
places of each library (environment, profiles, instance metadata) unless storage options
name them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import fsspec
from fsspec.core import split_protocol

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.storage.retry import client_options, policy

__all__ = ["LOCAL_PROTOCOLS", "filesystem", "is_local", "is_s3"]

LOCAL_PROTOCOLS = frozenset({"file", "local"})
EXTRAS = {
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "azure",
    "abfss": "azure",
    "az": "azure",
    "adl": "azure",
}
"""Schemes whose filesystem comes with an extra of this package."""
S3_SCHEMES = frozenset({"s3", "s3a"})
OBJECT_STORE_DEFAULTS: dict[str, Any] = {"use_listings_cache": False}
"""Listings are never cached: writers and Spark tasks change the timeline behind our back."""

fsspec.register_implementation("s3a", "s3fs.S3FileSystem", clobber=False)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def is_local(fs: Any) -> bool:
    return any(p in LOCAL_PROTOCOLS for p in _protocols(fs))


def is_s3(fs: Any) -> bool:
    """s3fs, whose calls some methods of `Storage` shape to send fewer requests."""
    return any(p in S3_SCHEMES for p in _protocols(fs))


def filesystem(base_path: str, options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem of `base_path` and the path on it; `UnsupportedTableError` when
    this machine cannot reach the scheme. Messages name the path, never the options."""
    scheme = (split_protocol(base_path)[0] or "file").lower()
    kwargs: dict[str, Any] = {}
    if scheme not in LOCAL_PROTOCOLS:
        retry = client_options(policy()) if scheme in S3_SCHEMES else {}
        kwargs = {**OBJECT_STORE_DEFAULTS, **retry, **(options or {})}
        if scheme in S3_SCHEMES:
            kwargs = _with_environment_endpoint(kwargs)
    try:
        fs, root = fsspec.core.url_to_fs(base_path, **kwargs)
    except ImportError:
        raise UnsupportedTableError(f"{base_path}: {_missing_library(scheme)}") from None
    except ValueError as exc:
        if "Protocol not known" not in str(exc):
            raise
        raise UnsupportedTableError(
            f"{base_path}: storage scheme {scheme}:// is not known; supported: file, s3, s3a, "
            "gs (tms[gcs]), abfs (tms[azure]), hdfs (with a Hadoop client)"
        ) from None
    except (OSError, RuntimeError) as exc:
        if scheme != "hdfs":
            raise
        reason = _first_reasons.setdefault(scheme, _first_line(exc))
        raise UnsupportedTableError(f"{base_path}: {_missing_library(scheme)} ({reason})") from None
    if is_s3(fs):
        fs.retries = 1  # s3fs's own loop off too: `Storage` retries, with jitter, and counts
    return fs, str(root)


S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
"""Where botocore finds an S3 endpoint in the environment, the service-specific one first."""


def _with_environment_endpoint(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The environment's S3 endpoint named in the options when they name none: fsspec keeps
    one filesystem per set of options, and one made without the endpoint would go on
    reaching the endpoint the environment had when it was made."""
    client_kwargs = kwargs.get("client_kwargs") or {}
    if "endpoint_url" in kwargs or "endpoint_url" in client_kwargs:
        return kwargs
    for name in S3_ENDPOINT_VARIABLES:
        endpoint = os.environ.get(name)
        if endpoint:
            return {**kwargs, "endpoint_url": endpoint}
    return kwargs


_first_reasons: dict[str, str] = {}
"""Why a library first failed to load: pyarrow says only "Prior attempt to load libhdfs
failed" after that."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _missing_library(scheme: str) -> str:
    if scheme == "hdfs":
        return (
            "hdfs:// needs a Hadoop client on this machine (libhdfs with HADOOP_HOME and a "
            "Hadoop CLASSPATH, as pyarrow's HDFS filesystem loads them); none could be loaded"
        )
    extra = EXTRAS.get(scheme)
    if extra is not None:
        return f"{scheme}:// needs the {extra} extra: pip install 'tms[{extra}]'"
    return f"{scheme}:// needs a filesystem library that is not installed"
