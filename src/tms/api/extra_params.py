"""The answer to an operation request whose `extra_params` the operation cannot carry
(`tms.application.UnusableParams`: `spark.*` keys off the instance's allow-list, keys that
are no planning parameter, values the action cannot use).

Admin tokens get no exception: what is stored is checked again at launch against the same
list, whoever sent it, so the way to allow a key is `TMS_SPARK_CONF_ALLOWED_EXTRA`.
"""

from __future__ import annotations

from fastapi.exceptions import RequestValidationError

from tms.application import UnusableParams

__all__ = ["unusable_params"]


def unusable_params(refused: UnusableParams, location: tuple[str, ...]) -> RequestValidationError:
    """422 `validation_error` listing every refused key. `location` is where the
    parameters came from: `("body", "extra_params")` names each key's own field
    (`body.extra_params.spark.jars`); the Hudi client's single query parameter
    (`("query", "extra_params")`) is named as it is, with the key in the message."""
    by_key = location[0] == "body"
    errors = [
        {"loc": (*location, key) if by_key else location, "msg": message, "type": "not_allowed"}
        for key, message in sorted(refused.problems.items())
    ]
    return RequestValidationError(errors)
