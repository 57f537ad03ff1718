"""The check of an operation request's `extra_params` before anything is stored.

`spark.*` keys become `--conf` of spark-submit, so only those on the instance's allow-list
pass (`tms.config.spark_conf`); every other key must be a planning parameter the job
knows, with a value the action can use (`tms.planning`). Admin tokens get no exception:
what is stored is checked again at launch against the same list, whoever sent it, so the
way to allow a key is `TMS_SPARK_CONF_ALLOWED_EXTRA`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError

from tms.config import Settings
from tms.config.spark_conf import allow_list
from tms.planning import planning_problems
from tms.store import Action

__all__ = ["check_extra_params"]


def check_extra_params(
    params: Mapping[str, Any], *, action: Action, settings: Settings, location: tuple[str, ...]
) -> None:
    """422 `validation_error` listing every refused key. `location` is where the
    parameters came from: `("body", "extra_params")` names each key's own field
    (`body.extra_params.spark.jars`); the Hudi client's single query parameter
    (`("query", "extra_params")`) is named as it is, with the key in the message."""
    refused = allow_list(settings).refused(params)
    problems = {key: f"{key} is not allowed: {reason}" for key, reason in refused.items()}
    problems |= planning_problems(action.value, params)
    if not problems:
        return
    by_key = location[0] == "body"
    errors = [
        {"loc": (*location, key) if by_key else location, "msg": message, "type": "not_allowed"}
        for key, message in sorted(problems.items())
    ]
    raise RequestValidationError(errors)
