"""The table services as the command line names them, made from the one list of their actions
(`tms.hudi.actions.TABLE_SERVICE_ACTIONS`, which the registry's entries follow), so a service
added there is a choice of every command that names one, `--help` included.

The list is read from `tms.hudi.actions`, not from `tms.services.registry`: the registry brings
every service's code (PySpark among it) into commands that only talk to the API.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import cast

from tms.hudi.actions import ACTION_ALIASES, TABLE_SERVICE_ACTIONS

__all__ = ["ServiceName", "service_names"]


class ServiceName(enum.StrEnum):
    """A table service named on the command line; `service_names` makes the members, one per
    action (and per RFC-43 word asked for), so Typer offers and parses them as choices."""

    @property
    def action(self) -> str:
        """The stored action this name stands for: an RFC-43 word's action, else itself."""
        return ACTION_ALIASES.get(self.value, self.value)


def service_names(enum_name: str, *, words: Iterable[str] = ()) -> type[ServiceName]:
    """A `ServiceName` enum of every table-service action in the registry's order, then the
    RFC-43 path `words` (`ACTION_ALIASES`' keys, e.g. `index`) a command also accepts.

    A member's name is its value with `-` as `_` (`metadata_compaction`); a word's ends in
    `_word` (`index_word`: `index` itself is taken by `str.index`)."""
    members = {action.replace("-", "_"): action for action in TABLE_SERVICE_ACTIONS}
    for word in words:
        if word not in ACTION_ALIASES:
            raise ValueError(f"{word!r} is not an RFC-43 word for an action")
        members[f"{word.replace('-', '_')}_word"] = word
    # Enum's functional API, a subclass of `ServiceName`; mypy reads the call as a lookup.
    made = ServiceName(enum_name, members)  # type: ignore[call-arg]
    return cast("type[ServiceName]", made)
