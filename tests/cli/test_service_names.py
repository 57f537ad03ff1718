"""The CLI's table-service choices follow the one list of actions (`TABLE_SERVICE_ACTIONS`,
which the registry follows): a service added there is offered and parsed by `tms ops`, and
the names the CLI took before stay as they were."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from tms.cli import app
from tms.cli import service_names as names_module
from tms.cli.operations import ActionName, _one_action
from tms.cli.service_names import ServiceName
from tms.hudi.actions import INDEXING, TABLE_SERVICE_ACTIONS
from tms.services.registry import SERVICES

WIDE = {"COLUMNS": "300"}
"""A terminal wide enough to keep each choice list and message on one line."""


def _help(*command: str) -> str:
    """`tms <command> --help`, as a wide terminal shows it."""
    result = CliRunner().invoke(app, [*command, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def test_ops_offers_every_registered_service_and_rfc43s_index() -> None:
    expected = [*SERVICES, "index"]
    assert [name.value for name in ActionName] == expected
    choices = "<" + "|".join(expected) + ">"
    assert _help("ops", "submit").count(choices) == 2  # the argument and --action
    assert _help("ops", "ls").count(choices) == 1
    refused = CliRunner().invoke(app, ["ops", "ls", "--action", "bogus"], env=WIDE)
    assert refused.exit_code == 2
    assert "'bogus' is not one of " + ", ".join(f"'{n}'" for n in expected) in refused.output


def test_the_member_names_and_actions_are_those_written_by_hand_before() -> None:
    """The members the CLI once listed by hand keep their names and values; a new action
    adds its own."""
    names = {member.name: (member.value, member.action) for member in ActionName}
    by_hand = {
        "compaction": ("compaction", "compaction"),
        "clustering": ("clustering", "clustering"),
        "clean": ("clean", "clean"),
        "metadata_compaction": ("metadata-compaction", "metadata-compaction"),
        "indexing": ("indexing", "indexing"),
        "index_word": ("index", INDEXING),
    }
    assert by_hand.items() <= names.items()
    derived = {action.replace("-", "_"): (action, action) for action in TABLE_SERVICE_ACTIONS}
    assert names == {**derived, "index_word": ("index", INDEXING)}


@pytest.mark.parametrize("name", [*TABLE_SERVICE_ACTIONS, "index"])
def test_ops_submit_parses_each_name(name: str) -> None:
    """Parsed before any call to the service: two different services named are refused."""
    other = "clean" if ActionName(name).action != "clean" else "compaction"
    result = CliRunner().invoke(
        app, ["ops", "submit", name, "--action", other, "--table", "t"], env=WIDE
    )
    assert result.exit_code == 2, result.output
    assert f"two table services named: {name} and --action {other}" in result.output


def test_index_and_indexing_are_one_service() -> None:
    assert _one_action(ActionName("index"), ActionName("indexing")).action == INDEXING


def test_a_service_added_to_the_list_is_a_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        names_module, "TABLE_SERVICE_ACTIONS", (*TABLE_SERVICE_ACTIONS, "log-compaction")
    )
    names = names_module.service_names("Names", words=("index",))
    assert [n.value for n in names] == [*TABLE_SERVICE_ACTIONS, "log-compaction", "index"]
    assert names("log-compaction").name == "log_compaction"

    chosen: list[str] = []

    def run(service: ServiceName) -> None:
        chosen.append(service.action)

    run.__annotations__["service"] = names  # as a command annotates its argument
    tiny = typer.Typer()
    tiny.command()(run)
    result = CliRunner().invoke(tiny, ["log-compaction"])
    assert result.exit_code == 0, result.output
    assert chosen == ["log-compaction"]


def test_only_rfc43_words_are_taken_as_aliases() -> None:
    with pytest.raises(ValueError, match="'nope' is not an RFC-43 word"):
        names_module.service_names("Names", words=("nope",))
