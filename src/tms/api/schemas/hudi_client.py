"""Query parameters of Hudi's table-service-manager client (`HoodieTableServiceManagerClient`).

The client sends every parameter on every call, and an unset one arrives empty (Java
`null` → `name=`), so blanks mean "not given". A `hoodie.table.service.manager.deploy.*`
setting the writer left unset arrives as Hudi's default (`HUDI_DEFAULTS`), which the client
cannot tell from a choice, so it is "not given" too: the table's owner and queue apply, and
the engine's memory and parallelism (Hudi's `spark:4g,4g` would otherwise keep every
delegated operation off the resident workers, which cannot size a JVM). `extra_params` is
`k=v;k=v`, `instant` a comma-separated list (possibly empty).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from tms.api.schemas.common import (
    BasePath,
    Engine,
    Identifier,
    Label,
    Resource,
    Text,
    check_instant,
    parse_extra_params,
)

__all__ = ["CLIENT_ACTIONS", "HUDI_DEFAULTS", "MAX_INSTANTS", "ClientAction", "ClientQuery"]

ClientAction = Literal["REQUEST", "CANCEL", "REGISTER"]
CLIENT_ACTIONS: tuple[ClientAction, ...] = ("REQUEST", "CANCEL", "REGISTER")
MAX_INSTANTS = 1000


HUDI_DEFAULTS = {
    "username": "default",
    "queue": "default",
    "resource": "spark:4g,4g",
    "parallelism": "100",
}
"""What the client sends for a deploy setting the writer did not set (the defaults of
HoodieTableServiceManagerConfig in Hudi 0.13 to 1.2)."""


def _blank(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _not_given(name: str) -> BeforeValidator:
    """Blank, or Hudi's default for the parameter: not given."""
    default = HUDI_DEFAULTS[name]

    def check(value: Any) -> Any:
        value = _blank(value)
        if isinstance(value, str | int) and str(value).strip().lower() == default:
            return None
        return value

    return BeforeValidator(check)


def _instants(value: str | None) -> str | None:
    if value is None:
        return None
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if len(parts) > MAX_INSTANTS:
        raise ValueError(f"at most {MAX_INSTANTS} instants")
    for part in parts:
        try:
            check_instant(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a Hudi instant time (17 digits)") from None
    return ",".join(parts)


def _client_action(value: Any) -> Any:
    value = _blank(value)
    if value is None:
        return "REQUEST"
    text = str(value).strip().upper()
    if text not in CLIENT_ACTIONS:
        raise ValueError(f"expected one of {', '.join(CLIENT_ACTIONS)}")
    return text


def _extra(value: str | None) -> str | None:
    parse_extra_params(value)
    return value


Blank = BeforeValidator(_blank)


class ClientQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    basepath: Annotated[BasePath | None, Blank] = None
    db_name: Annotated[Identifier | None, Blank] = None
    table_name: Annotated[Identifier | None, Blank] = None
    instant: Annotated[Text | None, Blank, AfterValidator(_instants)] = Field(
        None, description="comma-separated instant times"
    )
    action: Annotated[ClientAction, BeforeValidator(_client_action)] = Field(
        "REQUEST", description="case-insensitive; blank means REQUEST"
    )
    execution_engine: Annotated[Engine | None, Blank] = None
    username: Annotated[Label | None, _not_given("username")] = Field(
        None, description="the operations' owner; Hudi's default `default` means the table's"
    )
    queue: Annotated[Label | None, _not_given("queue")] = Field(
        None, description="Hudi's default `default` means the table's queue"
    )
    resource: Annotated[Resource | None, _not_given("resource")] = Field(
        None,
        description="spark:4g,4g, 4g:4g or 4g; Hudi's default `spark:4g,4g` means the "
        "engine's own memory",
    )
    parallelism: Annotated[int | None, _not_given("parallelism")] = Field(
        None, ge=1, le=100_000, description="Hudi's default `100` means the engine's own"
    )
    extra_params: Annotated[Text | None, Blank, AfterValidator(_extra)] = Field(
        None, description="k1=v1;k2=v2 or a JSON object"
    )

    @property
    def instants(self) -> list[str]:
        return self.instant.split(",") if self.instant else []

    @property
    def engine(self) -> str:
        return self.execution_engine or "spark"

    @property
    def params(self) -> dict[str, str]:
        return parse_extra_params(self.extra_params)
