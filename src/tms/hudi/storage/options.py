"""The storage options a table may carry, and how they reach processes that open it by URI.

An admin gives a table the credentials and endpoint of its store (`tbl.storage_options`); the
service and the job's driver hand them to fsspec (`HudiTable.open(base_path,
storage_options=…)`). Spark tasks build `Storage(uri)` themselves, with no options: a job
gives them a table's options as the standard environment variables of the store's library
(`task_environment`), which the library reads wherever no option is given. Only options that
have such a variable are accepted, so what the driver sees and what its tasks see never
differ: s3fs (through botocore) reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL` and `AWS_PROFILE`. Other schemes take their
credentials from the environment of the service and the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from fsspec.core import split_protocol

__all__ = [
    "StorageOptionError",
    "check_storage_options",
    "option_names",
    "task_environment",
]

S3_VARIABLES = {
    "key": "AWS_ACCESS_KEY_ID",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "token": "AWS_SESSION_TOKEN",
    "endpoint_url": "AWS_ENDPOINT_URL",
    "profile": "AWS_PROFILE",
}
"""s3fs's option → the variable botocore reads in its place."""
VARIABLES: dict[str, dict[str, str]] = {"s3": S3_VARIABLES, "s3a": S3_VARIABLES}
"""Per scheme, the options a table may carry and their variables."""
OptionValue = str | int | float | bool


class StorageOptionError(ValueError):
    """An option the table's scheme cannot carry; `option` names it (never its value)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def _scheme(base_path: str) -> str:
    return (split_protocol(base_path)[0] or "file").lower()


def option_names(base_path: str) -> frozenset[str]:
    """The options a table at `base_path` may carry (none on local disk, HDFS, GCS, ADLS)."""
    return frozenset(VARIABLES.get(_scheme(base_path), {}))


def check_storage_options(base_path: str, options: Mapping[str, OptionValue]) -> None:
    """Refuse an option the Spark tasks of a table at `base_path` could not be given."""
    allowed = option_names(base_path)
    for name in options:
        if name in allowed:
            continue
        scheme = _scheme(base_path)
        if not allowed:
            raise StorageOptionError(
                name,
                f"{scheme}:// tables take no storage options: their credentials come from "
                "the environment of the service and the cluster",
            )
        raise StorageOptionError(
            name,
            f"not a storage option of {scheme}:// tables; they take {', '.join(sorted(allowed))}",
        )


def task_environment(base_path: str, options: Mapping[str, OptionValue]) -> dict[str, str]:
    """The environment variables that give Spark tasks the table's options (checked first)."""
    check_storage_options(base_path, options)
    variables = VARIABLES.get(_scheme(base_path), {})
    return {variables[name]: _text(value) for name, value in options.items()}


def _text(value: OptionValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
